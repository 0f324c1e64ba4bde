"""One ``agentprov info``, in this fresh process, timed phase by phase (JSON on stdout).

Run by ``bench_cli_start.py``, never imported. It imports nothing at the top but what a
bare interpreter has already imported, so that every module agentprov needs is charged to
the phase that first imports it, in the order of a real ``agentprov info``: the script
imports ``agentprov_core.cli.main``; ``main()`` imports the error registry; click resolves
the ``info`` command; ``parts_rows()`` imports ``parts`` and ``plugins``, builds the plugin
manager (``builtin``, then every entry point of the group ``agentprov``), asks each plugin
for its sources and parses ``registry/parts.toml``; then the table is printed.
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
mark("import agentprov_core.errors (the error registry; main() imports it first)")
import_module("agentprov_core.cli.info")
mark("import agentprov_core.cli.info (cli.common)")
import_module("agentprov_core.registries.parts")
mark("import agentprov_core.registries.parts (msgspec, tomllib, tomlfile, paths)")
import_module("agentprov_core.plugins")
mark("import agentprov_core.plugins (pluggy, importlib.metadata, hookspecs)")
import_module("agentprov_core.builtin")
mark("import agentprov_core.builtin (endpoints, containment)")

from importlib import metadata  # noqa: E402 - already imported by agentprov_core.plugins

spent = {"eps": 0.0, "load": 0.0}
real_eps, real_load = metadata.entry_points, metadata.EntryPoint.load


def eps(**kw):
    s = pc()
    try:
        return real_eps(**kw)
    finally:
        spent["eps"] += pc() - s


def load(self):
    s = pc()
    try:
        return real_load(self)
    finally:
        spent["load"] += pc() - s


metadata.entry_points, metadata.EntryPoint.load = eps, load
plugins = import_module("agentprov_core.plugins").manager()
build = (pc() - _t) * 1000
metadata.entry_points, metadata.EntryPoint.load = real_eps, real_load
phases.append(["manager(): entry-point scan of every installed distribution",
               spent["eps"] * 1000, True])
phases.append(["manager(): import the plugin modules (agentprov_core.source, plans, "
               "catalogue, digests, plandoc, taskspec ...)", spent["load"] * 1000, True])
phases.append(["manager(): the rest (pluggy registration, distribution metadata)",
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
