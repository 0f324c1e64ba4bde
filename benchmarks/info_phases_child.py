"""One ``agentprov info``, in this fresh process, timed phase by phase (JSON on stdout).

Run by ``bench_cli_start.py``, never imported. It imports nothing at the top but what a
bare interpreter has already imported, so that every module agentprov needs is charged to
the phase that first imports it, in the order of a real ``agentprov info``: the script
imports ``agentprov_core.cli.main``, then the error registry (the first module of the
command imports it); click resolves the ``info`` command; ``parts_rows()`` imports
``parts`` and ``plugins``, builds the plugin manager (``builtin``, then every entry point
of the group ``agentprov``, read from the entry-point index beside the environment or
scanned), asks each plugin for its sources and parses ``registry/parts.toml``; then the
table is printed.
"""

import os
import sys
import time
from importlib import import_module

STARTED = time.time()  # wall clock: the parent subtracts its own start from it
pc = time.perf_counter
phases: list[list] = []  # [name, ms, counted in the total]
_t = pc()


def mark(name: str, counted: bool = True) -> None:
    global _t
    now = pc()
    phases.append([name, (now - _t) * 1000, counted])
    _t = now


import_module("agentprov_core.cli.main")
mark("import agentprov_core.cli.main (click)")
import_module("agentprov_core.errors")
mark("import agentprov_core.errors (the error registry)")
import_module("agentprov_core.cli.info")
mark("import agentprov_core.cli.info (cli.common)")
import_module("agentprov_core.registries.parts")
mark("import agentprov_core.registries.parts (msgspec, tomllib, tomlfile, paths)")
import_module("agentprov_core.plugins")
mark("import agentprov_core.plugins (pluggy, hookspecs, the entry-point index)")
import_module("agentprov_core.builtin")
mark("import agentprov_core.builtin (endpoints, containment)")

entrypoints = import_module("agentprov_core.base.entrypoints")
spent = {"eps": 0.0, "load": 0.0}
real_eps = entrypoints.entry_points


class Timed:
    """An entry point whose load is timed."""

    def __init__(self, ref):
        self.ref, self.name = ref, ref.name
        self.distribution, self.version = ref.distribution, ref.version

    def load(self):
        s = pc()
        try:
            return self.ref.load()
        finally:
            spent["load"] += pc() - s


def eps(group):
    s = pc()
    try:
        return [Timed(r) for r in real_eps(group)]
    finally:
        spent["eps"] += pc() - s


entrypoints.entry_points = eps
plugins = import_module("agentprov_core.plugins").manager()
build = (pc() - _t) * 1000
entrypoints.entry_points = real_eps
scanned = "importlib.metadata" in sys.modules
phases.append(["manager(): the group's entry points ("
               + ("scanned: importlib.metadata, every installed distribution"
                  if scanned else "from the index beside the environment") + ")",
               spent["eps"] * 1000, True])
phases.append(["manager(): import the plugin modules (agentprov_core.source, plans, "
               "catalogue, digests, plandoc, taskspec ...)", spent["load"] * 1000, True])
phases.append(["manager(): the rest (pluggy registration, freezing what is alive)",
               build - (spent["eps"] + spent["load"]) * 1000, True])
_t = pc()
plugins.sources()
mark("sources(): each plugin's agentprov_sources hook")
info = import_module("agentprov_core.cli.info").info
with open(os.devnull, "w") as null:
    saved, sys.stdout = sys.stdout, null
    try:
        info.callback(fmt="text")
    finally:
        sys.stdout = saved
mark("the command: parts_rows() (parses registry/parts.toml), the table, echo")
import_module("agentprov_core.registries.parts").load()
mark("memo, not in the total: parts.load() alone (parse registry/parts.toml)", counted=False)

FINISHED = time.time()

import json  # noqa: E402 - after the measurement (already imported by agentprov_core.errors)

print(json.dumps({"started": STARTED, "finished": FINISHED, "phases": phases}))
