"""agentprov source plugin: agentharm."""
