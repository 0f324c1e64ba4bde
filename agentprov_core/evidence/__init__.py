"""Evidence records: the AER (``agentprov-aer/0.1``), its derived semantics (SEM), the PROV
graph, their validation, and where a corpus keeps them (``executions/``)."""
