"""The plan document and its cells: task SPECs (``taskspec``), the document a run is asked
for (``plandoc``, format ``agentprov-run-plan/0.1``), reading ``--plan PLAN.toml``
(``planfile``), and the cells expanded from it with the plan and configuration digests
(``plans``). Pure data: nothing here starts a process or reads the network.

May import: ``base``, ``catalogue``, ``errors``.
"""
