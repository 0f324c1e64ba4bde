"""oMLX's two variables through the real CLI: its optional key `OMLX_API_KEY`, stored with
`agentprov keys set` and sent to the loopback server only, and its model variable
`OMLX_MODEL`, which `--keychain` (keys only) leaves to `./.env`, `--env-file` or
`--env-stdin`. The keychain is the test-only file backend; the server a loopback stand-in
of oMLX that refuses every request without the key."""

from __future__ import annotations

import json
import uuid

import pytest
from conftest import make_marker, snapshot

from tests.test_endpoints_consent import BANKING, env_id
from tests.test_keys import FILE_BACKEND
from tests.test_local_models import FakeServer, omlx_routes

MODEL = "Qwen3.5-4B-MLX-4bit"


@pytest.mark.req("R-11.24", "R-11.30", "R-11.25")
def test_the_key_from_the_keychain_and_the_model_from_the_env_file(cli, home, corpora,
                                                                    tmp_path):
    key = f"sk-omlx-{uuid.uuid4().hex}"
    kenv = {"HOME": str(tmp_path / "user"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
            "XDG_DATA_HOME": str(tmp_path / "xdg"), "PYTHON_KEYRING_BACKEND": FILE_BACKEND,
            "AGENTPROV_TEST_KEYRING_FILE": str(tmp_path / "keyring.json")}
    r = cli("keys", "set", "OMLX_API_KEY", "--stdin", stdin=key + "\n", env=kenv)
    assert r.code == 0, r.err
    assert "stored OMLX_API_KEY in the keychain" in r.out + r.err
    assert "used by: omlx" in r.out + r.err
    # the keychain holds keys only: the model variable is not one
    r = cli("keys", "set", "OMLX_MODEL", "--stdin", stdin=MODEL + "\n", env=kenv)
    assert r.code == 2, r.err
    make_marker(home, env_id())
    server = FakeServer(omlx_routes(tmp_path), require_key=key)
    cwd = tmp_path / "work"
    cwd.mkdir()
    run = ("run", "agentdojo", "--dry-run", "--corpus", corpora / "c", "--campaign", "c",
           *BANKING, "--endpoint", "omlx", "--base-url", server.base_url, "--containment", "vm")
    outputs = []
    try:
        # --keychain: the key from the keychain (./.env's is wrong), the model from ./.env
        (cwd / ".env").write_text(f"OMLX_MODEL={MODEL}\nOMLX_API_KEY=sk-omlx-wrong\n")
        r = cli(*run, "--keychain", env=kenv, cwd=cwd)
        outputs.append(r)
        # past step 4 (the model observed): a marker alone cannot start the worker
        assert (r.code, r.error["error"]) == (3, "cli.environment.worker"), r.err
        assert server.requests and {h.get("Authorization") for _, _, h in server.requests} == {
            f"Bearer {key}"}
        (cwd / ".env").write_text("OMLX_MODEL=another-model\n")
        r = cli(*run, "--keychain", env=kenv, cwd=cwd)
        outputs.append(r)
        assert (r.code, r.error["error"]) == (3, "run.local.model_not_served")
        assert "'another-model'" in r.error["message"] and MODEL in r.error["message"]
        (cwd / ".env").unlink()
        r = cli(*run, "--keychain", env=kenv, cwd=cwd)
        outputs.append(r)
        assert (r.code, r.error["error"]) == (3, "run.local.no_model_id")
        assert "OMLX_MODEL in .env" in r.error["message"]
        # --env-file and --env-stdin carry it too (with the key, which they then must hold)
        env_file = tmp_path / "omlx.env"
        env_file.write_text(f"OMLX_API_KEY={key}\nOMLX_MODEL=another-model\n")
        r = cli(*run, "--env-file", env_file, env=kenv, cwd=cwd)
        outputs.append(r)
        assert (r.code, r.error["error"]) == (3, "run.local.model_not_served")
        r = cli(*run, "--env-stdin", env=kenv, cwd=cwd,
                stdin=json.dumps({"OMLX_API_KEY": key, "OMLX_MODEL": "another-model"}))
        outputs.append(r)
        assert (r.code, r.error["error"]) == (3, "run.local.model_not_served")
    finally:
        server.close()
    assert all(key not in o.out + o.err for o in outputs)
    assert all(key.encode() not in data for data in snapshot(home).values())
    assert list(corpora.iterdir()) == []
