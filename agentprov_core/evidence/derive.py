"""From a stored AER to the files beside it: SEM, PROV and validation.

This is the one place both the live path (T0, at the end of every attempt) and ``recompute``
derive from an AER, so that a re-derivation is byte-for-byte what was stored.
"""

from __future__ import annotations

from pathlib import Path

from agentprov_core.evidence.aer import AER


def derive(aer: AER, aer_bytes: bytes, corpus_root: Path, *,
           skip_prov: bool = False) -> dict[str, bytes]:
    """The SEM, PROV and validation of ``aer`` (:func:`derive_attested` without the
    record)."""
    return derive_attested(aer, aer_bytes, corpus_root, skip_prov=skip_prov)[0]


def derive_attested(aer: AER, aer_bytes: bytes, corpus_root: Path, *,
                    skip_prov: bool = False) -> tuple[dict[str, bytes], bytes | None]:
    """Return ``{"sem": …, "prov": …, "validation": …}`` (stored bytes) for ``aer``, and
    the ``validated.jsonl`` line of a clean validation
    (:func:`agentprov_core.evidence.validated.attest`; None when it found anything).

    :param aer: the execution record, as decoded from ``aer_bytes``.
    :param aer_bytes: its stored bytes (their sha256 is what PROV and validation cite).
    :param corpus_root: the corpus the AER's evidence lives in (the linkage tier resolves
        every PROV entity against it).
    :param skip_prov: ``--skip-prov-conformance``: no PROV graph, and validation records
        the prov tier as skipped (the execution is then ``unvalidated``).
    """
    from agentprov_core.evidence import prov, sem, validated, validation
    from agentprov_core.evidence.canonical import stored

    s = sem.derive(aer)
    sem_bytes = stored(s)
    prov_bytes = None if skip_prov else prov.derive(aer, aer_bytes, s, sem_bytes)
    targets: list[tuple[str, str]] = []
    v = validation.validate(aer_bytes, sem_bytes, prov_bytes, corpus_root, targets=targets)
    out = {"sem": sem_bytes, "validation": stored(v)}
    if prov_bytes is not None:
        out["prov"] = prov_bytes
    return out, validated.attest(v, out["validation"], targets)
