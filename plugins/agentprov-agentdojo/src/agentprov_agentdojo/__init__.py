"""agentprov source plugin: agentdojo."""
