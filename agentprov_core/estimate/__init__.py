"""``agentprov estimate`` and ``agentprov prices``: what a plan would cost and take, before it
runs, from dated prices and per-cell statistics (docs/estimates.md).

May import: every stage below it (``run``, ``backend``, ``live``, ``evidence``, ``corpus``,
``registries``, ``plan``, ``source``, ``mapping``, ``plugins``, ``settings``, ``catalogue``,
``base``,
``errors``); nothing but the command line imports it.
"""
