"""What every stage stands on: where agentprov keeps its files (``paths``), reading a file a
user names without trusting it (``inputfile``) and TOML with errors that name the line
(``tomlfile``), canonical JSON and its digests (``digests``), the redaction scan over
everything staged (``redaction``), the debug timer of a run's phases (``timing``) and
percentiles by nearest rank (``ranks``).

May import: ``errors`` only.
"""
