"""What a model adds to a run, real or scripted: endpoint kinds and their URL rules
(``endpoints``), keys (``keys``), caps on calls and spend
(``caps``), the preflight probe (``preflight``, A3 A4 A9), the canary and the quality
counts (``canary``, ``quality``, reading replies through ``replies`` and ``sse``), the
egress proxy (``egress``), local model servers (``local/``, A14) and the scripted
transport (``scripted/``).

May import: ``base``, ``errors``, ``settings`` (the base-URL setting, a local model's
stored facts); never another stage.
"""
