"""The working corpus (``DIR.partial``): manifest, append-only ledger, raw store, staging."""
