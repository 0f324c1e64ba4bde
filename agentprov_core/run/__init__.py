"""One ``agentprov run``: what was asked (``options``, parsed once, in a ``runrequest``), the
checks in the specification's order up to the plan (``prepare``), what follows the plan
(``sequence``: the corpus checks and consent, ``consent``), and the campaign that runs the
due units in workers and keeps what happened (``campaign`` and the pieces it drives).

May import: every stage below it (``backend``, ``live``, ``evidence``, ``corpus``,
``registries``, ``plan``, ``source``, ``mapping``, ``plugins``, ``catalogue``, ``base``,
``errors``); nothing but the command line and ``estimate`` import it.
"""
