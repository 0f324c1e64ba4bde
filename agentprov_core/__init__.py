"""agentprov: run agent-security benchmarks live and record what happened as evidence."""

__version__ = "0.1.0"
