"""Local model servers: what a server on loopback is, what it serves, and the observed
identity of one model (``agentprov-local-model/0.2``).

- :mod:`agentprov_core.live.local.kinds`: the six server kinds, how each recognises itself on its
  port, the generic ``openai_compat`` (any OpenAI-style listing, unverified), the read-only
  probes (GET only, loopback, short timeouts) and the refusals ``run.local.*`` they raise.
- :mod:`agentprov_core.live.local.weights`: sha256 of weight files, with the digest cache
  ``$AGENTPROV_HOME/cache/model-digests.jsonl``.
- :mod:`agentprov_core.live.local.identity`: the identity record, :func:`observe`,
  :func:`reobserve` and :func:`session_note` (A14), the numbered pick and the LM Studio tool-use check.
- :mod:`agentprov_core.live.local.apimodels`: an API endpoint's dated model-list cache.

Nothing here runs inference, and nothing is imported by ``agentprov --help``.
"""
