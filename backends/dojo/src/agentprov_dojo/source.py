"""The worker source of an AgentDojo-shaped benchmark (:class:`DojoSource`)."""

from __future__ import annotations

from typing import Any

from agentprov_backend.source import WorkerSource

from agentprov_dojo.catalogue import SourceProfile


class DojoSource(WorkerSource):
    """Serves one AgentDojo-shaped source: its catalogue read from the installed
    ``agentdojo`` under ``profile``'s policy, its cells run by AgentDojo's own runner
    (:mod:`agentprov_dojo.cells`), its forkserver warmed by :mod:`agentprov_dojo.preload`."""

    preload = ("agentprov_dojo.preload",)

    def __init__(self, profile: SourceProfile) -> None:
        self.profile = profile
        self.name = profile.name

    def catalogue(self) -> dict[str, Any]:
        from agentprov_dojo.catalogue import agentdojo_shaped_catalogue

        return agentdojo_shaped_catalogue(self.name, self.profile)

    def warm(self, asked: dict[str, Any]) -> None:
        from agentprov_dojo import preload

        preload.warm_cells(asked)

    def run_cell(self, request: dict[str, Any]) -> dict[str, Any]:
        from agentprov_dojo import cells

        return cells.run_cell(request, declared=self.profile.declared)
