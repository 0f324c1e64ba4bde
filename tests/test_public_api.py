"""The public plugin API (``agentprov_core.api``): every name it lists is the core's own
object, loaded on first use, and a name it does not list is refused. That the bundled plugins
and the example import nothing else is import-linter's ``public-api`` contract (tox -e lint)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pytest

from agentprov_core import api


@pytest.mark.parametrize("name", api.__all__)
def test_each_name_is_the_cores_own_object(name):
    value = getattr(api, name)
    if name in api._MODULES:
        assert isinstance(value, types.ModuleType) and value.__name__ == api._MODULES[name]
    else:
        assert value is getattr(importlib.import_module(api._NAMES[name]), name)


def test_a_name_outside_the_api_is_refused_naming_what_is_in_it():
    with pytest.raises(AttributeError, match="has no 'Plugins': a plugin may use .*hookimpl"):
        api.Plugins  # noqa: B018
    with pytest.raises(ImportError):
        exec("from agentprov_core.api import manager", {})


def test_a_plugins_metadata_imports_neither_the_mapping_nor_the_worker_client():
    """What a source plugin's module names to be listed (``agentprov info``) costs only
    those types: the AER, the capture view and the worker client load when first used."""
    code = ("import sys\n"
            "from agentprov_core.api import BackendProject, SourceMeta, SuiteSource, hookimpl\n"
            "print(sorted(m for m in ('agentprov_core.evidence.aer',"
            " 'agentprov_core.evidence.capture_view', 'agentprov_core.backend.workerclient',"
            " 'agentprov_core.live.sse') if m in sys.modules))\n"
            "from agentprov_core.api import aer\n"
            "print('agentprov_core.evidence.aer' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["[]", "True"]
