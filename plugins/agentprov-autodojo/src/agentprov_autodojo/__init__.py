"""agentprov source plugin: autodojo."""
