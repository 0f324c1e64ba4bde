"""Evidence records: the AER (``agentprov-aer/0.1``), its derived semantics (SEM), the PROV
graph, their validation, where a corpus keeps them (``executions/``), mapping a live
attempt through the registered mapper (``live_mapping``), importing a benchmark's own result
files into an import corpus (``importing``), T0's reading of capture logs and the mapping
of an AgentDojo-shaped session that plugins subclass (``dojo_mapper``).

May import: ``corpus``, ``mapping``, ``live`` (a streamed reply's body), ``plugins``,
``base``, ``errors``.
"""
