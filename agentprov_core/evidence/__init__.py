"""Evidence records: the AER (``agentprov-aer/0.1``), its derived semantics (SEM), the PROV
graph, their validation, where a corpus keeps them (``executions/``), mapping a live
attempt through the registered mapper (``live_mapping``), importing a benchmark's own result
files into an import corpus (``importing``) and T0's reading of capture logs.

May import: ``corpus``, ``mapping``, ``plugins``, ``base``, ``errors``.
"""
