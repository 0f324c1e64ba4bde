"""One ``agentprov run``: what was asked (``runrequest``), the checks in the specification's
order up to the plan (``prepare``), and the campaign that runs the due units in workers and
keeps what happened (``campaign`` and the pieces it drives).

May import: every stage below it (``backend``, ``live``, ``evidence``, ``corpus``,
``registries``, ``plan``, ``source``, ``mapping``, ``plugins``, ``catalogue``, ``base``,
``errors``); nothing but the command line and ``estimate`` import it.
"""
