"""agentprov source plugin: agentdyn."""
