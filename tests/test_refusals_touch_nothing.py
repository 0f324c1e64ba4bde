"""The four refusals up to the caps (R-18.10 to R-18.13) read no key, contact no server and
use no network (R-18.14): each runs with a key in the keychain (the test-only file backend)
and in ./.env, under an audit hook that records every open of either file and every socket
connection or name lookup. A positive control, the same API run with its caps and prices,
opens the keychain."""

from __future__ import annotations

import json
import uuid

import pytest
from conftest import make_marker, snapshot

from tests.test_endpoints_consent import BANKING, CAPS, OPENROUTER, audited, env_id
from tests.test_keys import FILE_BACKEND, VAR, FileTestKeyringStore

SENTINEL = f"sk-or-v1-TOUCHNOTHING{uuid.uuid4().hex}"


def refusals(corpora, script) -> list[tuple[tuple[str, ...], int, str]]:
    dry = ("run", "agentdojo", "--dry-run", "--corpus", str(corpora / "c"), "--campaign", "c",
           *BANKING)
    return [
        ((*dry, *OPENROUTER, "--containment", "vm"), 4, "cli.refused.api_caps"),
        ((*dry, *OPENROUTER, "--containment", "vm", "--max-calls", "80", "--max-cost-usd",
          "1.00"), 2, "cli.usage.cost_needs_prices"),
        (("run", "agentdojo", "--preflight-only", *OPENROUTER, "--max-calls", "5"), 2,
         "cli.usage.preflight_caps"),
        ((*dry, "--llm-script", str(script), "--keychain"), 2, "cli.usage.script_credential"),
    ]


@pytest.mark.req("R-18.14", "R-16.8")
def test_the_four_refusals_read_no_key_and_use_no_network(cli, home, corpora, script,
                                                          tmp_path):
    make_marker(home, env_id())  # the API caps refusal is step 3: past the environment
    keyring = tmp_path / "keyring.json"
    env = {"HOME": str(tmp_path / "user"), "AGENTPROV_HOME": str(home),
           "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "XDG_DATA_HOME": str(tmp_path / "xdg"),
           "PYTHON_KEYRING_BACKEND": FILE_BACKEND, "AGENTPROV_TEST_KEYRING_FILE": str(keyring)}
    FileTestKeyringStore(env).set(VAR, SENTINEL)
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / ".env").write_text(f"{VAR}={SENTINEL}\n")
    before = snapshot(home)
    for args, code, error in refusals(corpora, script):
        for watched in (keyring, cwd / ".env"):
            log = tmp_path / "audit.json"
            p = audited(cli, log, watched, *args, env=env, cwd=cwd)
            assert p.returncode == code, (args, p.stderr)
            assert json.loads(p.stderr.strip().splitlines()[-1])["error"] == error, p.stderr
            assert json.loads(log.read_text()) == [], (args, watched)
            assert SENTINEL not in p.stdout + p.stderr
    assert snapshot(home) == before and list(corpora.iterdir()) == []
    # the positive control: with its caps and prices the run reads the key (keychain first)
    log = tmp_path / "audit.json"
    dry = ("run", "agentdojo", "--dry-run", "--corpus", str(corpora / "c"), "--campaign", "c",
           *BANKING, *OPENROUTER, *CAPS, "--containment", "vm")
    p = audited(cli, log, keyring, *dry, env=env, cwd=cwd)
    assert ["open", str(keyring.resolve())] in json.loads(log.read_text()), p.stderr
    assert SENTINEL not in p.stdout + p.stderr
