"""What every stage stands on: where agentprov keeps its files (``paths``), reading a file a
user names or a corpus holds without trusting it and checking a path before anything is
written at it (``inputfile``), TOML with errors that name the line (``tomlfile``), canonical JSON and its digests (``digests``), the redaction scan over
everything staged (``redaction``), the debug timer of a run's phases (``timing``) and
percentiles by nearest rank (``ranks``).

May import: ``errors`` only.
"""
