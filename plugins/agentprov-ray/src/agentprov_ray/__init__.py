"""The ``ray`` executor of agentprov: a campaign's cells on the nodes of a Ray cluster."""
