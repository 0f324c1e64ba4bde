"""agentprov source plugin: rope."""
