"""agentprov's canonical JSON: one byte form (``agentprov_capture.canonical``) for capture
records and, without floats, for every plan, configuration and identity digest; and the
stored form of evidence records (``evidence/canonical.py``, msgspec), which agrees with it
except in how a float is written. Digests of what corpora already hold do not change."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import agentprov_capture
import pytest

from agentprov_core.base import digests
from agentprov_core.evidence import canonical as records

ROOT = Path(__file__).resolve().parent.parent

#: documents and their digests as earlier builds computed them (``base/digests.py`` with its
#: own ``json.dumps``): a plan, a configuration, the escapes and integers JSON can hold
EARLIER = [
    ({"plan": {"source": "agentdojo", "suites": ["banking", "slack"], "repeats": 3,
               "defences": ["none", "spotlighting"]}},
     "6cfe62aadcae035c8dc661ca721071d6a8e79f737ebc94cea7a3b27a79d6708f"),
    ({"model": "gpt-4o-2024-08-06", "temperature": "0", "max_tokens": 4096, "seed": None,
      "stream": False},
     "ebbfa1d16090d1a4760f4ecd8e7c4488074fef06852e2cd1bc547468f9318751"),
    ({"é": "naïve — “quotes” 😀", "ctl": "tab\tnl\nnul\x00del\x7f", "u2028": "\u2028",
      "big": -2**70, "t": (1, [2, {"z": 0, "a": True}])},
     "57e09c7d3a2878fdb8d170e6514b57d070ceb83b6fab797947d67ffbe10221dc"),
    ([], "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"),
    ({}, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"),
]


@pytest.mark.parametrize(("doc", "want"), EARLIER)
def test_a_digest_is_the_one_earlier_builds_computed(doc, want):
    assert digests.digest(doc) == want


@pytest.mark.parametrize(("doc", "_"), EARLIER)
def test_without_floats_the_three_forms_are_one(doc, _):
    """A digest's bytes are the capture form's, and the stored records' form agrees."""
    assert digests.canonical_json(doc) == agentprov_capture.canonical(doc)
    assert records.canonical(doc) == agentprov_capture.canonical(doc)


@pytest.mark.parametrize(("value", "capture", "stored"), [
    (1e16, b"1e+16", b"1e16"), (1e-7, b"1e-07", b"1e-7"), (0.5, b"0.5", b"0.5")])
def test_floats_are_refused_in_a_digest_and_written_two_ways(value, capture, stored):
    """The two forms differ only here, and each is fixed by the bytes corpora store."""
    with pytest.raises(TypeError, match="floats are not allowed"):
        digests.canonical_json({"a": [value]})
    assert agentprov_capture.canonical({"t": value}) == b'{"t":' + capture + b"}"
    assert records.canonical({"t": value}) == b'{"t":' + stored + b"}"
    with pytest.raises(ValueError):
        agentprov_capture.canonical({"t": float("nan")})


def test_a_stored_record_of_an_earlier_build_is_still_its_canonical_form():
    """Committed evidence records of a real session: each file is exactly the stored form
    of what it decodes to, so ``validate`` and ``recompute`` keep passing stored corpora."""
    for name in ("aer-0.1.1.json", "prov-0.1.1.json"):
        data = (ROOT / "tests" / "fixtures" / "defended" / "undefended" / name).read_bytes()
        assert records.stored(json.loads(data)) == data, name
        assert records.sha256(data) == hashlib.sha256(data).hexdigest()
