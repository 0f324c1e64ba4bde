"""The working corpus (``DIR.partial``): manifest, append-only ledger, raw store, staging
read through directory descriptors (``staged``), opening a corpus and its self-digest.

May import: ``base``, ``errors``.
"""
