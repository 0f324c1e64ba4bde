"""ROPE (head): a planned part with no backend in this build; `agentprov run rope` exits 5."""

from agentprov_core.api import Source, SourceMeta, hookimpl


class Rope(Source):
    meta = SourceMeta(
        name="rope",
        label="rope · head (live)",
        summary="ROPE's head: no live backend in this build",
        kind="suites",
        backend=None,
        live_status="planned",
        caveat="none; no backend in this build",
    )


@hookimpl
def agentprov_sources():
    return [Rope()]
