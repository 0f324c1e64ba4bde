"""Sealed corpora (agentprov-corpus/0.3) through the real CLI: `package` seals a finished
scripted corpus (the synthetic example corpus of test_corpus_tools, written the way T0
writes one: test_only, scripted transport), `keys signing` makes the key (in the test-only
file keychain, or a 0600 file when no keychain works), `verify` checks the seal offline,
`prove` and `verify --proof` one execution alone, and a later release carries an RFC 9162
consistency proof. Each refusal is asserted by its code, its exit code and an unchanged
directory; each attack on a sealed corpus by the code verify reports. The envelope is also
verified by securesystemslib, an independent DSSE implementation."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import ROOT, snapshot
from test_corpus_tools import corpus, index_entries, pristine  # noqa: F401 (fixtures)

FILE_BACKEND = "agentprov_core.testing.memkeyring.FileTestKeyring"
FAIL_BACKEND = "keyring.backends.fail.Keyring"


@pytest.fixture
def work(request) -> Path:
    """A private copy of test_corpus_tools' example corpus (a finished scripted campaign)."""
    return request.getfixturevalue("corpus")


@pytest.fixture
def kenv(tmp_path: Path, home: Path) -> dict[str, str]:
    """The test-only file keychain (a subprocess's stand-in for the OS keychain)."""
    return {"HOME": str(home), "PYTHON_KEYRING_BACKEND": FILE_BACKEND,
            "AGENTPROV_TEST_KEYRING_FILE": str(tmp_path / "keyring.json")}


@pytest.fixture
def release(tmp_path: Path) -> list[str]:
    spec = tmp_path / "in" / "corpus-spec.toml"
    spec.parent.mkdir()
    spec.write_text('format = "agentprov-corpus-spec/0.2"\n')
    lic = tmp_path / "in" / "LICENSE"
    lic.write_text("MIT License\n")
    return ["--spec", str(spec), "--licence-file", f"LICENSE={lic}"]


@pytest.fixture
def signer(cli, kenv, tmp_path) -> Path:
    """The signing key ``lab`` in the keychain; returns its exported public key."""
    r = cli("keys", "signing", "new", "lab", env=kenv)
    assert r.code == 0, r.err
    r = cli("keys", "signing", "export-public", "lab", env=kenv)
    pub = tmp_path / "lab.pub"
    pub.write_text(r.out)
    return pub


def seal(cli, work: Path, release, out: Path, *extra: str, env=None, version="0.1.0"):
    return cli("package", "--corpus", work, "--corpus-version", version, *release,
               "--out", out, *extra, env=env)


@pytest.fixture
def sealed(cli, work, release, kenv, signer, tmp_path) -> Path:
    out = tmp_path / "sealed"
    r = seal(cli, work, release, out, "--sign-key", "lab", env=kenv)
    assert r.code == 0, r.err
    return out


def statement(root: Path) -> dict:
    env = json.loads((root / "seal" / "statement.dsse.json").read_bytes())
    return json.loads(base64.b64decode(env["payload"]))


def verify(cli, *args) -> tuple[int, str, set[str]]:
    r = cli("verify", *args, "--format", "json")
    doc = json.loads(r.out)
    part = doc.get("sealed", doc)
    codes = {f["code"] for f in part["findings"]}
    return r.code, part["result"], codes


# ----------------------------------------------------------------------------- sealing
@pytest.mark.req("R-27.15", "R-27.16")
def test_package_seals_a_scripted_corpus_signed_and_verifiable(cli, work, sealed, signer):
    before = snapshot(work)
    # the working corpus's files, unchanged, beside the seal; .lock, staging/ and T0's
    # record of clean validations left out
    for rel, data in before.items():
        if rel not in (".lock", "validated.jsonl"):
            assert (sealed / rel).read_bytes() == data, rel
    assert (sealed / "licences" / "LICENSE").read_text() == "MIT License\n"
    st = statement(sealed)
    assert st["_type"] == "https://in-toto.io/Statement/v1"
    p = st["predicate"]
    assert p["format"] == "agentprov-corpus/0.3"
    assert (p["test_only"], p["supports_live_capture_claim"]) == (True, False)
    assert p["corpus"]["id"] == "agentdojo-live-demo" and p["corpus"]["version"] == "0.1.0"
    assert p["counts"]["executions"] == 5 and p["transport"] == "scripted"
    assert p["manifest"]["sha256"] == hashlib.sha256(before["manifest.json"]).hexdigest()
    assert st["subject"][0]["digest"]["sha256"] == p["tree"]["root_sha256"]
    r = cli("verify", "--corpus", sealed, "--trusted-key", signer)
    assert r.code == 0, r.out
    assert r.out.splitlines()[-1] == "agentprov verify: level sealed: passed"
    assert "level chain: passed; 0 failed, 0 unverified" in r.out


def test_checksums_are_sha256sum_compatible(sealed):
    if shutil.which("sha256sum") is None:
        pytest.skip("no sha256sum on this machine")
    p = subprocess.run(["sha256sum", "-c", "--strict", "checksums.sha256"], cwd=sealed,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    listed = {ln.split("  ", 1)[1] for ln in (sealed / "checksums.sha256").read_text().splitlines()}
    on_disk = {str(q.relative_to(sealed)) for q in sealed.rglob("*") if q.is_file()}
    assert listed == on_disk - {"checksums.sha256"}


def test_the_envelope_verifies_with_securesystemslib(sealed, signer, tmp_path, cli, kenv):
    """An independent DSSE implementation (securesystemslib), not our code, checks it."""
    from cryptography.hazmat.primitives import serialization
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError
    from securesystemslib.signer import SSlibKey

    def key_of(pem: bytes) -> SSlibKey:
        raw = serialization.load_pem_public_key(pem).public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return SSlibKey(hashlib.sha256(raw).hexdigest(), "ed25519", "ed25519",
                        {"public": raw.hex()})

    env = Envelope.from_dict(json.loads((sealed / "seal" / "statement.dsse.json").read_bytes()))
    assert env.payload_type == "application/vnd.in-toto+json"
    good = key_of(signer.read_bytes())
    assert set(env.verify([good], 1)) == {good.keyid}
    assert cli("keys", "signing", "new", "other", env=kenv).code == 0
    other = key_of(cli("keys", "signing", "export-public", "other", env=kenv).out.encode())
    with pytest.raises(VerificationError):
        env.verify([other], 1)


@pytest.mark.req("R-2.25", "R-27.17")
def test_an_unsigned_seal_says_so_and_does_not_pass(cli, work, release, tmp_path):
    out = tmp_path / "unsigned"
    r = seal(cli, work, release, out)
    assert r.code == 0, r.err
    assert "package: unsigned: nothing says who sealed it" in r.out
    p = statement(out)["predicate"]
    assert (p["test_only"], p["synthetic"], p["supports_live_capture_claim"]) == (
        True, True, False)
    code, result, codes = verify(cli, "--corpus", out)
    assert (code, result, codes) == (1, "unverified", {"sealed.unsigned"})


# ----------------------------------------------------------------------------- refusals
def _refused(cli, work, release, tmp_path, want: str, exit_code: int = 4, env=None):
    out = tmp_path / "sealed"
    before = snapshot(tmp_path / "corpora")
    r = seal(cli, work, release, out, env=env)
    assert (r.code, r.error["error"]) == (exit_code, want), r.err
    assert not out.exists()
    assert snapshot(tmp_path / "corpora") == before
    assert not [p for p in tmp_path.rglob("*sealing*")]
    return r


def test_a_corpus_held_by_a_run_is_refused(cli, work, release, tmp_path):
    from agentprov_core.corpus.working import WorkingCorpus

    wc = WorkingCorpus(work)
    wc.lock()
    try:
        r = _refused(cli, work, release, tmp_path, "package.refused.unfinished")
    finally:
        wc.unlock()
    assert "a run holds it" in r.error["message"]


def test_a_unit_in_flight_is_refused(cli, work, release, tmp_path):
    (work / "staging" / "s-9999").mkdir(parents=True)
    (work / "staging" / "s-9999" / "capture.jsonl").write_text("{}\n")
    r = _refused(cli, work, release, tmp_path, "package.refused.unfinished")
    assert "staging/" in r.error["message"]


def test_what_a_finished_run_leaves_in_staging_is_not_in_flight(cli, work, release, tmp_path):
    """The worker's home and stderr, and a session kept by --keep-staging (ledgered), stay
    in staging/ after a campaign: the corpus is finished, and staging/ is not sealed."""
    ledgered = json.loads((work / "ledger.jsonl").read_bytes().splitlines()[0])["session_id"]
    for d in ("home", ledgered):
        (work / "staging" / d).mkdir(parents=True)
    (work / "staging" / "worker.stderr").write_text("")
    out = tmp_path / "sealed"
    r = seal(cli, work, release, out)
    assert r.code == 0, r.err
    assert not (out / "staging").exists()


def test_a_campaign_that_never_closed_is_refused(cli, work, release, tmp_path):
    from agentprov_core.corpus.working import WorkingCorpus

    wc = WorkingCorpus(work)
    m = wc.manifest()
    del m["stops"]
    wc.write_manifest(m)
    r = _refused(cli, work, release, tmp_path, "package.refused.unfinished")
    assert "stops" in r.error["message"]


def test_a_symlink_inside_is_refused(cli, work, release, tmp_path):
    (tmp_path / "elsewhere").write_text("not evidence\n")
    os.symlink(tmp_path / "elsewhere", work / "executions" / "link.json")
    r = _refused(cli, work, release, tmp_path, "package.refused.unsealable")
    assert "executions/link.json is a symlink" in r.error["message"]


def test_a_corpus_that_fails_verify_is_refused(cli, work, release, tmp_path):
    cap = next((work / "raw" / "sha256").rglob("*"))
    while cap.is_dir():
        cap = next(cap.iterdir())
    os.chmod(cap, 0o644)
    data = bytearray(cap.read_bytes())
    data[40] ^= 1
    cap.write_bytes(bytes(data))
    r = _refused(cli, work, release, tmp_path, "package.refused.unsealable")
    assert "verify fails" in r.error["message"]


def test_a_real_corpus_without_consent_is_refused(cli, work, release, tmp_path):
    from agentprov_core.corpus.working import WorkingCorpus

    wc = WorkingCorpus(work)
    m = wc.manifest()
    m["test_only"] = False
    wc.write_manifest(m)
    # every capture header and AER says test_only: verify fails first, whatever else
    r = _refused(cli, work, release, tmp_path, "package.refused.unsealable")
    assert "test_only" in r.error["message"] or "consent" in r.error["message"]


@pytest.mark.req("R-25.38", "R-27.14")
def test_the_order_of_refusals_is_kept(cli, work, release, tmp_path):
    from agentprov_core.corpus.working import WorkingCorpus

    r = cli("package", "--corpus", work, "--corpus-version", "0.1.0")
    assert (r.code, r.error["error"]) == (2, "package.usage.spec")
    r = cli("package", "--corpus", work, *release)
    assert (r.code, r.error["error"]) == (2, "package.usage.version")
    wc = WorkingCorpus(work)
    m = wc.manifest()
    m["restricted"] = {"why": "a restricted-use corpus", "holds": "harmful prompts",
                       "licence": "MIT with an AI-safety clause"}
    wc.write_manifest(m)
    (work / "staging").mkdir()
    (work / "staging" / "s-1").mkdir()  # unfinished too: restricted is refused first
    _refused(cli, work, release, tmp_path, "package.refused.restricted")


def test_an_imported_corpus_is_not_sealed(cli, tmp_path, release):
    other = tmp_path / "corpora" / "imported"
    other.mkdir(parents=True)
    (other / "manifest.json").write_text(json.dumps({"format": "agentprov-corpus/0.2"}))
    (other / "ledger.jsonl").write_text("")
    _refused(cli, other, release, tmp_path, "package.unsupported.sealing", 5)


# ----------------------------------------------------------------------------- keys
def _written(base: Path, skip: set[Path]) -> bytes:
    return b"\n".join(p.read_bytes() for p in sorted(base.rglob("*"))
                      if p.is_file() and p not in skip)


def _forms(raw: bytes) -> list[bytes]:
    return [raw, raw.hex().encode(), base64.b64encode(raw), base64.b64encode(raw)[:40]]


def test_the_private_key_appears_in_nothing_written_or_printed(cli, work, release, kenv,
                                                                tmp_path):
    """The key made in the (test) keychain is a unique sentinel: its bytes, hex and base64
    are in no file under the test's directory but the keychain's own, and in no output."""
    outs = []
    for args in (("keys", "signing", "new", "lab"), ("keys", "signing", "list"),
                 ("keys", "signing", "export-public", "lab")):
        r = cli(*args, env=kenv)
        assert r.code == 0, r.err
        outs += [r.out, r.err]
    r = seal(cli, work, release, tmp_path / "sealed", "--sign-key", "lab", env=kenv)
    assert r.code == 0, r.err
    outs += [r.out, r.err]
    r = cli("prove", "--corpus", tmp_path / "sealed", "--execution", "s-0001abcdef0123",
            "--out", tmp_path / "p.json")
    outs += [r.out, r.err]
    keyring = Path(kenv["AGENTPROV_TEST_KEYRING_FILE"])
    stored = json.loads(keyring.read_text())
    (value,) = [v for k, v in _flatten(stored) if "lab" in k]
    raw = bytes.fromhex(value)
    assert len(raw) == 32
    everything = _written(tmp_path, {keyring}) + "".join(outs).encode()
    for form in _forms(raw):
        assert form not in everything
    assert not list((tmp_path / "home" / "signing-keys").glob("*.key"))


def _flatten(d, prefix=""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from _flatten(v, f"{prefix}{k}/")
        else:
            yield f"{prefix}{k}", v


def test_without_a_keychain_the_key_is_a_0600_file_named_and_warned_about(cli, kenv,
                                                                          tmp_path, home):
    env = {**kenv, "PYTHON_KEYRING_BACKEND": FAIL_BACKEND}
    r = cli("keys", "signing", "new", "lab", env=env)
    assert r.code == 0, r.err
    key = home / "signing-keys" / "lab.key"
    assert (key.stat().st_mode & 0o777) == 0o600
    assert f"the private key is in the file {key} (mode 0600)" in r.err
    assert "warning" in r.err
    body = b"".join(key.read_bytes().splitlines()[1:-1])
    assert body not in (r.out + r.err).encode()
    listed = cli("keys", "signing", "list", "--format", "json", env=env)
    (row,) = json.loads(listed.out)
    assert row["name"] == "lab" and row["private_key"] == str(key)
    again = cli("keys", "signing", "new", "lab", env=env)
    assert (again.code, again.error["error"]) == (4, "keys.refused.signing_exists")
    bad = cli("keys", "signing", "new", "../x", env=env)
    assert (bad.code, bad.error["error"]) == (2, "keys.usage.signing_name")
    r = cli("package", "--corpus", tmp_path, "--corpus-version", "1", "--spec", key,
            "--sign-key", "nobody", env=env)
    assert r.code in (2, 3)


# ----------------------------------------------------------------------------- attacks
def _rewrite_checksum(root: Path, rel: str) -> None:
    p = root / "checksums.sha256"
    lines = []
    for ln in p.read_text().splitlines():
        sha, name = ln.split("  ", 1)
        if name == rel:
            sha = hashlib.sha256((root / rel).read_bytes()).hexdigest()
        lines.append(f"{sha}  {name}")
    p.write_text("\n".join(lines) + "\n")


def _writable(p: Path) -> Path:
    os.chmod(p, 0o644)
    return p


def _flip(p: Path, at: int = 10) -> None:
    data = bytearray(_writable(p).read_bytes())
    data[at] ^= 1
    p.write_bytes(bytes(data))


def _swap(root: Path) -> None:
    a = _writable(root / "executions" / "s-0000abcdef0123" / "sem.json")
    b = _writable(root / "executions" / "s-0001abcdef0123" / "sem.json")
    da, db = a.read_bytes(), b.read_bytes()
    a.write_bytes(db)
    b.write_bytes(da)


def _edit_payload(root: Path) -> None:
    p = root / "seal" / "statement.dsse.json"
    env = json.loads(p.read_bytes())
    st = json.loads(base64.b64decode(env["payload"]))
    st["predicate"]["test_only"] = False
    env["payload"] = base64.b64encode(json.dumps(st).encode()).decode()
    p.write_text(json.dumps(env))
    _rewrite_checksum(root, "seal/statement.dsse.json")


def _truncate_envelope(root: Path) -> None:
    p = root / "seal" / "statement.dsse.json"
    p.write_bytes(p.read_bytes()[:100])


def _edit_with_checksums(root: Path) -> None:
    p = root / "licences" / "LICENSE"
    p.write_text("All rights reserved\n")
    _rewrite_checksum(root, "licences/LICENSE")


ATTACKS = {
    "a byte flipped": (lambda r: _flip(r / "executions" / "s-0002abcdef0123" / "aer.json"),
                       {"sealed.file_changed", "sealed.tree_head"}),
    "files swapped between executions": (_swap, {"sealed.file_changed", "sealed.tree_head"}),
    "an execution removed": (lambda r: shutil.rmtree(r / "executions" / "s-0003abcdef0123"),
                             {"sealed.file_removed", "sealed.tree_head"}),
    "a file added": (lambda r: (r / "executions" / "extra.json").write_text("{}\n"),
                     {"sealed.file_added", "sealed.tree_head"}),
    "checksums edited to match": (_edit_with_checksums,
                                  {"sealed.file_changed", "sealed.tree_head"}),
    "the payload edited": (_edit_payload, {"sealed.signature"}),
    "a truncated envelope": (_truncate_envelope, {"sealed.envelope", "sealed.file_changed"}),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_each_attack_on_a_sealed_corpus_fails_verify_with_its_code(cli, sealed, signer,
                                                                   attack):
    edit, want = ATTACKS[attack]
    edit(sealed)
    code, result, codes = verify(cli, "--corpus", sealed, "--trusted-key", signer)
    assert (code, result) == (1, "failed")
    assert want <= codes, codes


def test_a_signature_of_another_key_is_untrusted_not_a_pass(cli, sealed, kenv, tmp_path):
    assert cli("keys", "signing", "new", "other", env=kenv).code == 0
    other = tmp_path / "other.pub"
    other.write_text(cli("keys", "signing", "export-public", "other", env=kenv).out)
    r = cli("verify", "--corpus", sealed, "--trusted-key", other)
    assert r.code == 1
    assert "level sealed: unverified" in r.out
    assert "unverified: sealed.untrusted_key at seal/statement.dsse.json: signed by an " \
           "untrusted key" in r.out
    bad = cli("verify", "--corpus", sealed, "--trusted-key", tmp_path / "nope.pub")
    assert (bad.code, bad.error["error"]) == (2, "verify.usage.trusted_key")


# ----------------------------------------------------------------------------- proofs
def test_one_execution_is_proven_alone(cli, sealed, signer, tmp_path):
    bundle = tmp_path / "one.proof.json"
    r = cli("prove", "--corpus", sealed, "--execution", "s-0001abcdef0123", "--out", bundle)
    assert r.code == 0, r.err
    assert bundle.stat().st_size < 100_000
    names = {leaf["name"] for leaf in json.loads(bundle.read_bytes())["leaves"]}
    assert {"executions/s-0001abcdef0123/aer.json", "executions.jsonl#L2",
            "ledger.jsonl#L2"} <= names
    assert any(n.startswith("raw/sha256/") for n in names)
    alone = tmp_path / "elsewhere"
    alone.mkdir()
    moved = alone / bundle.name
    shutil.move(bundle, moved)
    shutil.rmtree(sealed)  # the corpus is not needed
    code, result, codes = verify(cli, "--proof", moved, "--trusted-key", signer)
    assert (code, result, codes) == (0, "passed", set())
    doc = json.loads(moved.read_bytes())
    leaf = next(x for x in doc["leaves"] if x["name"].endswith("aer.json"))
    content = bytearray(base64.b64decode(leaf["content"]))
    content[20] ^= 1
    leaf["content"] = base64.b64encode(bytes(content)).decode()
    moved.write_text(json.dumps(doc))
    code, result, codes = verify(cli, "--proof", moved, "--trusted-key", signer)
    assert (code, result, codes) == (1, "failed", {"proof.file_changed"})
    leaf["sha256"] = hashlib.sha256(bytes(content)).hexdigest()  # a consistent forgery
    moved.write_text(json.dumps(doc))
    code, result, codes = verify(cli, "--proof", moved, "--trusted-key", signer)
    assert (code, result, codes) == (1, "failed", {"proof.inclusion"})


# ----------------------------------------------------------------------------- releases
def _earlier(work: Path, tmp_path: Path) -> Path:
    """The same corpus before its last attempt (what a resume then added)."""
    early = tmp_path / "corpora" / "early" / work.name
    shutil.copytree(work, early)
    last = "s-0004abcdef0123"
    aer = json.loads((early / "executions" / last / "aer.json").read_bytes())
    for ev in aer["header"]["evidence"]:
        (early / ev["path"]).unlink()
    shutil.rmtree(early / "executions" / last)
    for name in ("executions.jsonl", "ledger.jsonl"):
        p = _writable(early / name)
        lines = p.read_bytes().splitlines(keepends=True)
        p.write_bytes(b"".join(lines[:-1]))
    return early


def test_a_later_release_carries_a_consistency_proof(cli, work, release, kenv, signer,
                                                     tmp_path):
    early = _earlier(work, tmp_path)
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    assert seal(cli, early, release, v1, "--sign-key", "lab", env=kenv).code == 0
    r = seal(cli, work, release, v2, "--sign-key", "lab", "--previous", v1, env=kenv,
             version="0.2.0")
    assert r.code == 0, r.err
    prev = statement(v2)["predicate"]["previous"]
    assert (prev["version"], prev["tree_size"]) == (
        "0.1.0", statement(v1)["predicate"]["tree"]["size"])
    assert prev["root_sha256"] == statement(v1)["predicate"]["tree"]["root_sha256"]
    assert verify(cli, "--corpus", v2, "--trusted-key", signer) == (0, "passed", set())
    # the release the other way round drops what the earlier one held: refused
    before = snapshot(tmp_path / "corpora")
    r = seal(cli, early, release, tmp_path / "v3", "--previous", v2, env=kenv,
             version="0.3.0")
    assert (r.code, r.error["error"]) == (4, "package.refused.rewritten")
    assert not (tmp_path / "v3").exists() and snapshot(tmp_path / "corpora") == before


def test_a_consistency_proof_that_does_not_hold_fails(cli, work, release, tmp_path):
    early = _earlier(work, tmp_path)
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    assert seal(cli, early, release, v1).code == 0
    assert seal(cli, work, release, v2, "--previous", v1, version="0.2.0").code == 0
    p = v2 / "seal" / "statement.dsse.json"
    env = json.loads(p.read_bytes())
    st = json.loads(base64.b64decode(env["payload"]))
    st["predicate"]["previous"]["root_sha256"] = "0" * 64  # a head the release never had
    env["payload"] = base64.b64encode(json.dumps(st).encode()).decode()
    p.write_text(json.dumps(env))  # unsigned: no signature to break
    _rewrite_checksum(v2, "seal/statement.dsse.json")
    code, result, codes = verify(cli, "--corpus", v2)
    assert (code, result) == (1, "failed")
    assert codes == {"sealed.consistency", "sealed.unsigned"}


# ----------------------------------------------------------------------------- a real campaign
@pytest.mark.slow
@pytest.mark.req("R-27.15", "R-2.25")
def test_a_scripted_campaign_seals_and_its_resume_seals_as_a_later_release(e2e_cli, tmp_path):
    """A real scripted campaign through the built AgentDojo environment, stopped by
    --limit, sealed; resumed to the end and sealed again with --previous: the second
    release's statement proves the first tree is a prefix of its own."""
    live = tmp_path / "live-demo"
    args = ("run", "agentdojo", "--corpus", live, "--campaign", "demo", "--suite", "banking",
            "--user-tasks", "0-1", "--attack", "important_instructions", "--injection-tasks",
            "0", "--model-display-name", "Scripted Model",
            "--llm-script", ROOT / "examples" / "scripts" / "live-demo.json")
    first = e2e_cli(*args, "--limit", "2")
    assert first.code == 0, first.err
    spec = tmp_path / "corpus-spec.toml"
    spec.write_text('format = "agentprov-corpus-spec/0.2"\n')
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    r = e2e_cli("package", "--corpus", live, "--corpus-version", "0.1.0", "--spec", spec,
                "--out", v1)
    assert r.code == 0, r.err
    p1 = statement(v1)["predicate"]
    assert (p1["test_only"], p1["corpus"]["partial"], p1["counts"]["executions"]) == (
        True, True, 2)
    second = e2e_cli(*args)
    assert second.code == 0, second.err
    r = e2e_cli("package", "--corpus", live, "--corpus-version", "0.2.0", "--spec", spec,
                "--out", v2, "--previous", v1)
    assert r.code == 0, r.err
    p2 = statement(v2)["predicate"]
    assert p2["counts"]["executions"] == 4 and p2["previous"]["version"] == "0.1.0"
    r = e2e_cli("verify", "--corpus", v2, "--format", "json")
    doc = json.loads(r.out)
    assert doc["result"] == "passed" and doc["failed"] == 0
    assert {f["code"] for f in doc["sealed"]["findings"]} == {"sealed.unsigned"}


# ----------------------------------------------------------------------------- one pass
def test_level_sealed_hashes_only_the_files_level_chain_did_not_read(sealed, signer,
                                                                      monkeypatch):
    from agentprov_core.audit import sealed as sealed_mod
    from agentprov_core.audit.verification import verify_corpus
    from agentprov_core.base import dsse

    hashed: list[str] = []
    real = sealed_mod.sha256_file
    monkeypatch.setattr(sealed_mod, "sha256_file",
                        lambda p: hashed.append(os.path.relpath(p, sealed)) or real(p))
    read: dict[str, str] = {}
    assert not verify_corpus(sealed, read).failed
    key = dsse.load_public(signer.read_bytes())
    assert sealed_mod.verify_sealed(sealed, key, read).result == "passed"
    assert sorted(hashed) == ["corpus-spec.toml", "executions.jsonl", "ledger.jsonl",
                              "licences/LICENSE", "manifest.json", "seal/statement.dsse.json",
                              "seal/tree.json"]
    # what level chain read is still held against checksums.sha256 and the tree
    aer = sealed / "executions" / "s-0002abcdef0123" / "aer.json"
    _flip(aer)
    read.clear()
    verify_corpus(sealed, read)
    rep = sealed_mod.verify_sealed(sealed, key, read)
    assert read["executions/s-0002abcdef0123/aer.json"] == hashlib.sha256(
        aer.read_bytes()).hexdigest()
    assert {("sealed.file_changed", "executions/s-0002abcdef0123/aer.json"),
            ("sealed.tree_head", "seal/tree.json")} <= {(f[1], f[2]) for f in rep.findings}


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_validation_in_processes_reports_what_one_process_reports(work, monkeypatch, fmt):
    from agentprov_core.audit import validation

    _flip(work / "executions" / "s-0002abcdef0123" / "sem.json")
    _flip(work / "executions" / "s-0004abcdef0123" / "prov.json", at=40)
    monkeypatch.setattr(validation, "BATCH", 2)  # three batches of the five executions
    got = []
    # processes first: the prov library warns of a name once per process (it caches
    # names), and the children are forked from this one
    for workers in (2, 1):
        lines: list[str] = []
        run = validation.Run(work, strict=True, release=False, skip_prov=False, fmt=fmt,
                             echo=lines.append)
        got.append((run.corpus(workers=workers), lines, run.tally))
    assert got[0] == got[1]
    failed, lines, tally = got[1]
    assert failed and (tally.executions, tally.failed, tally.passed) == (5, 2, 3)
    shown = lines if fmt == "text" else [f["execution"] for f in tally.failures]
    assert any("s-0002abcdef0123" in x for x in shown)
    assert any("s-0004abcdef0123" in x for x in shown)


def test_package_refuses_a_corpus_whose_validation_fails_in_a_worker_process(
        cli, work, release, tmp_path):
    """verify passes (the index, the files and validation.json agree) while the stored
    PROV graph lacks a model call the AER records: only validate --strict sees it, in the
    processes that validate for package."""
    from test_corpus_tools import edit_execution_file, edit_index

    from agentprov_core.evidence import validation as valmod
    from agentprov_core.evidence.live_mapping import _validation_status

    def drop_a_call(data: bytes) -> bytes:
        prov = json.loads(data)
        prov["activity"].pop(next(k for k in prov["activity"] if "/model-call/" in k))
        return json.dumps(prov, sort_keys=True, indent=1).encode()

    edit_execution_file(work, 1, "prov", drop_a_call)
    d = work / "executions" / "s-0001abcdef0123"
    again = valmod.encode(valmod.as_standard(valmod.validate(
        (d / "aer.json").read_bytes(), (d / "sem.json").read_bytes(),
        (d / "prov.json").read_bytes(), work)))
    assert _validation_status(again) == "failed"
    edit_execution_file(work, 1, "validation", lambda _: again)
    edit_index(work, 1, validation="failed")
    assert verify(cli, "--corpus", work)[1] != "failed"
    r = _refused(cli, work, release, tmp_path, "package.refused.unsealable")
    assert "validate --strict fails" in r.err


# ----------------------------------------------------------------------------- the archive
def test_an_archive_is_deterministic_and_verify_and_prove_read_it(cli, work, release, kenv,
                                                                  signer, tmp_path):
    import tarfile

    a, b = tmp_path / "one" / "demo-0.1.0.tar", tmp_path / "two" / "demo-0.1.0.tar"
    for out in (a, b):
        r = seal(cli, work, release, out, "--sign-key", "lab", env=kenv)
        assert r.code == 0, r.err
    assert a.read_bytes() == b.read_bytes()
    assert not list(a.parent.glob(".*")) and not list(b.parent.glob(".*"))  # nothing left
    with tarfile.open(a) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names[0] == "demo-0.1.0" and all(n.startswith("demo-0.1.0/") for n in names[1:])
    assert names == sorted(names, key=lambda n: n.split("/"))
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, 0, "", "")}
    assert {(m.type, m.mode) for m in members} == {(tarfile.DIRTYPE, 0o755),
                                                   (tarfile.REGTYPE, 0o444)}
    # the archive holds what the directory of the same seal holds, byte for byte
    d = tmp_path / "dir"
    assert seal(cli, work, release, d, "--sign-key", "lab", env=kenv).code == 0
    with tarfile.open(a) as tar:
        held = {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in members
                if m.isreg()}
    assert held == {str(p.relative_to(d)): p.read_bytes() for p in d.rglob("*") if p.is_file()}
    code, result, codes = verify(cli, "--corpus", a, "--trusted-key", signer)
    assert (code, result, codes) == (0, "passed", set())
    bundle = tmp_path / "one.proof.json"
    r = cli("prove", "--corpus", a, "--execution", "s-0001abcdef0123", "--out", bundle)
    assert r.code == 0, r.err
    assert verify(cli, "--proof", bundle, "--trusted-key", signer)[:2] == (0, "passed")
    assert not [p for p in Path(tempfile.gettempdir()).glob(".agentprov-archive-*")]


def _retar(src: Path, dst: Path, edit) -> None:
    import io
    import tarfile

    with tarfile.open(src) as tin, tarfile.open(dst, "w", format=tarfile.PAX_FORMAT) as tout:
        for m in tin.getmembers():
            data = tin.extractfile(m).read() if m.isreg() else None
            for m2, d2 in edit(m, data):
                tout.addfile(m2, io.BytesIO(d2) if d2 is not None else None)


def test_an_edited_or_unsafe_archive_fails(cli, work, release, kenv, signer, tmp_path):
    import tarfile

    a = tmp_path / "demo-0.1.0.tar"
    assert seal(cli, work, release, a, "--sign-key", "lab", env=kenv).code == 0
    aer = "demo-0.1.0/executions/s-0002abcdef0123/aer.json"

    def flip(m, data):
        if m.name == aer:
            data = data[:10] + bytes([data[10] ^ 1]) + data[11:]
        yield m, data

    edited = tmp_path / "edited.tar"
    _retar(a, edited, flip)
    code, result, codes = verify(cli, "--corpus", edited, "--trusted-key", signer)
    assert (code, result) == (1, "failed")
    assert {"sealed.file_changed", "sealed.tree_head"} <= codes

    def link(name: str, kind: bytes, target: str):
        def edit(m, data):
            yield m, data
            if m.name == aer:
                extra = tarfile.TarInfo(name)
                extra.type, extra.linkname = kind, target
                yield extra, None
        return edit

    for i, edit in enumerate((link("demo-0.1.0/executions/x.json", tarfile.SYMTYPE,
                                   "/etc/passwd"),
                              link("demo-0.1.0/../escape.json", tarfile.REGTYPE, ""),
                              link("other/x.json", tarfile.REGTYPE, ""))):
        bad = tmp_path / f"bad{i}.tar"
        _retar(a, bad, edit)
        r = cli("verify", "--corpus", bad, "--trusted-key", signer)
        assert (r.code, r.error["error"]) == (3, "corpus.environment.not_a_corpus"), r.err
        out = tmp_path / f"bad{i}.proof.json"
        r = cli("prove", "--corpus", bad, "--execution", "s-0001abcdef0123", "--out", out)
        assert (r.code, r.error["error"]) == (3, "corpus.environment.not_a_corpus")
        assert not out.exists()
    assert not (tmp_path / "escape.json").exists()


# ------------------------------------------------- T0's record of clean validations
def _validations(monkeypatch) -> list[str]:
    """The execution ids the validator validates in this process, from now on."""
    from agentprov_core.evidence import validation as valmod

    seen: list[str] = []
    real = valmod.validate

    def spy(aer_bytes, *a, **k):
        seen.append(json.loads(aer_bytes)["header"]["execution_id"])
        return real(aer_bytes, *a, **k)

    monkeypatch.setattr(valmod, "validate", spy)
    return seen


def _strict(work: Path, recorded: bool) -> tuple[bool, object]:
    """``validate --strict`` as ``package`` runs it (after verify, with its digests), in one
    process; whether it failed, and its tally."""
    from agentprov_core.audit.validation import Run
    from agentprov_core.audit.verification import verify_corpus

    read: dict[str, str] = {}
    assert not verify_corpus(work, read).failed
    run = Run(work, strict=True, release=False, skip_prov=False, fmt="json",
              echo=lambda *a: None, known=read, recorded=recorded)
    return run.corpus(), run.tally


def _recorded_ids(work: Path) -> list[str]:
    return [json.loads(x)["execution_id"]
            for x in (work / "validated.jsonl").read_bytes().splitlines()]


def test_t0_records_each_clean_validation_and_package_validates_only_the_rest(
        work, monkeypatch):
    from agentprov_core.evidence import validated

    ids = [e.execution_id for e in index_entries(work)]
    recorded = _recorded_ids(work)
    assert recorded and set(recorded) <= set(ids)
    lines = [json.loads(x) for x in (work / "validated.jsonl").read_bytes().splitlines()]
    assert {x["validator"] for x in lines} == {validated.identity()}
    seen = _validations(monkeypatch)
    failed, tally = _strict(work, recorded=True)
    assert not failed and tally.recorded == len(recorded)
    assert sorted(seen) == sorted(set(ids) - set(recorded))
    seen.clear()
    failed, tally = _strict(work, recorded=False)  # what `validate --strict` does: all
    assert not failed and tally.recorded == 0 and sorted(seen) == sorted(ids)


def test_a_record_of_another_validator_is_not_taken(work, monkeypatch):
    path = work / "validated.jsonl"
    path.write_bytes(b"".join(
        json.dumps({**json.loads(x), "validator": "agentprov 0.0.9; rules 1"}).encode() + b"\n"
        for x in path.read_bytes().splitlines()))
    seen = _validations(monkeypatch)
    failed, tally = _strict(work, recorded=True)
    assert not failed and tally.recorded == 0
    assert sorted(seen) == sorted(e.execution_id for e in index_entries(work))


def test_a_corpus_without_records_is_validated_in_full_and_seals(cli, work, release,
                                                                tmp_path, monkeypatch):
    (work / "validated.jsonl").unlink()
    seen = _validations(monkeypatch)
    failed, tally = _strict(work, recorded=True)
    assert not failed and tally.recorded == 0 and len(seen) == len(index_entries(work))
    r = seal(cli, work, release, tmp_path / "sealed")
    assert r.code == 0, r.err


def _drop_a_model_call(data: bytes) -> bytes:
    prov = json.loads(data)
    prov["activity"].pop(next(k for k in prov["activity"] if "/model-call/" in k))
    return json.dumps(prov, sort_keys=True, indent=1).encode()


def _rederive_validation(work: Path, i: int) -> None:
    """Store execution ``i``'s validation as the validator finds it now, and its index line
    to match: ``verify`` then finds nothing, and only ``validate --strict`` fails."""
    from test_corpus_tools import edit_execution_file, edit_index

    from agentprov_core.evidence import validation as valmod
    from agentprov_core.evidence.live_mapping import _validation_status

    d = work / "executions" / index_entries(work)[i].execution_id
    again = valmod.encode(valmod.as_standard(valmod.validate(
        (d / "aer.json").read_bytes(), (d / "sem.json").read_bytes(),
        (d / "prov.json").read_bytes(), work)))
    edit_execution_file(work, i, "validation", lambda _: again)
    edit_index(work, i, validation=_validation_status(again))


def test_a_prov_graph_changed_after_its_record_is_refused(cli, work, release, tmp_path):
    from test_corpus_tools import edit_execution_file

    eid = index_entries(work)[0].execution_id
    assert eid in _recorded_ids(work)
    edit_execution_file(work, 0, "prov", _drop_a_model_call)
    _rederive_validation(work, 0)
    assert verify(cli, "--corpus", work)[1] != "failed"
    r = _refused(cli, work, release, tmp_path, "package.refused.unsealable")
    assert "validate --strict fails" in r.err


def test_an_aer_field_changed_after_its_record_is_refused(cli, work, release, tmp_path):
    from test_corpus_tools import edit_aer

    eid = index_entries(work)[0].execution_id
    assert eid in _recorded_ids(work)
    edit_aer(work, 0, producer__version="9.9.9")
    _rederive_validation(work, 0)
    r = _refused(cli, work, release, tmp_path, "package.refused.unsealable")
    assert "fails" in r.error["message"]


def test_validate_strict_checks_every_execution_whatever_its_record_says(cli, work):
    """A record naming the digests of a graph that fails (written by hand, not by T0) is
    taken by ``package``'s check, which trusts T0's record as it trusts T0's other
    files; ``validate --strict`` validates every execution and fails it."""
    from test_corpus_tools import edit_execution_file

    edit_execution_file(work, 0, "prov", _drop_a_model_call)
    _rederive_validation(work, 0)
    e = index_entries(work)[0]
    path = work / "validated.jsonl"
    lines = [json.loads(x) for x in path.read_bytes().splitlines()]
    for x in lines:
        if x["execution_id"] == e.execution_id:
            x.update(prov_sha256=e.prov_sha256, validation_sha256=e.validation_sha256)
    path.write_bytes(b"".join(json.dumps(x).encode() + b"\n" for x in lines))
    assert not _strict(work, recorded=True)[0]
    r = cli("validate", "--corpus", work, "--strict")
    assert r.code != 0 and e.execution_id in r.out, r.out


def test_a_file_changed_after_verify_read_it_is_not_sealed(work, tmp_path):
    """``seal`` copies the files ``verify`` read without hashing them again: one written
    after that read began would be sealed under a digest that is not its bytes', so it is
    refused, and nothing is written."""
    from agentprov_core.audit import sealing
    from agentprov_core.corpus.opening import open_corpus
    from agentprov_core.errors import AgentprovError

    c = open_corpus(work)
    verified = sealing.check_verifies(c)
    eid = index_entries(work)[0].execution_id
    assert f"executions/{eid}/sem.json" in verified.digests
    sem = work / "executions" / eid / "sem.json"
    os.chmod(sem, 0o644)
    sem.write_bytes(sem.read_bytes().replace(b"{", b"{ ", 1))
    spec, lic = tmp_path / "spec.toml", tmp_path / "LICENSE"
    spec.write_text('format = "agentprov-corpus-spec/0.2"\n')
    lic.write_text("MIT\n")
    out = tmp_path / "out" / "sealed"
    with pytest.raises(AgentprovError) as exc:
        sealing.seal(sealing.Release(c, "0.1.0", spec, [("LICENSE", lic)], out, None,
                                     verified=verified))
    assert exc.value.code == "package.refused.unsealable"
    assert "changed while the corpus was being sealed" in str(exc.value)
    assert list((tmp_path / "out").iterdir()) == []


def test_the_record_of_clean_validations_is_not_sealed(work, sealed):
    """It only spares package work: the release's leaves stay those of the format."""
    assert (work / "validated.jsonl").is_file()
    assert not (sealed / "validated.jsonl").exists()
    assert "validated.jsonl" not in (sealed / "checksums.sha256").read_text()
