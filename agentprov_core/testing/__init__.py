"""Testing helpers for plugin authors.

``agentprov_core.testing.fixtures`` is a pytest plugin: name it in your ``conftest.py`` (or
test module) to register a plugin for one test and run the CLI in-process against it::

    pytest_plugins = ["agentprov_core.testing.fixtures"]

    def test_catalogue(agentprov_plugin, agentprov_cli):
        agentprov_plugin(my_plugin_module)
        result = agentprov_cli("run", "mybench", "--catalogue")
        assert result.exit_code == 0

``agentprov_core.testing.contract`` is the contract suite every source plugin passes::

    pytest -p no:cacheprovider --pyargs agentprov_core.testing.contract

(``AGENTPROV_CONTRACT_SOURCE=NAME`` narrows it to one installed source.) The plugin
author's guide, docs/plugins.md, walks through both.

The names below are imported from ``fixtures`` on first use, so that importing this
package (or the contract) does not import the pytest plugin before pytest registers it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CliResult", "build_plugins", "register", "run_cli", "use_plugins"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from agentprov_core.testing import fixtures

        return getattr(fixtures, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
