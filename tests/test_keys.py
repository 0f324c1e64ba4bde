"""Keys: the keychain, .env files and --env-stdin, and `agentprov keys`.

Every key path is exercised with a unique sentinel value (spec 002's discipline), and each
test proves that no byte written (stdout, stderr, every file under the test's tmp tree:
HOME, AGENTPROV_HOME, XDG directories) holds it, except the file the key was put in by the
test (a .env) or stored in on purpose (the test-only keyring file), where it must be.

Headless Linux has no keychain, so subprocess tests select the test-only file backend
(agentprov_core.testing.memkeyring.FileTestKeyring) through PYTHON_KEYRING_BACKEND; the
refusal of an unusable keychain is tested with keyring's real fail backend.
"""

from __future__ import annotations

import copy
import io
import json
import os
import pickle
import pty
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path
from uuid import uuid4

import pytest
from conftest import ROOT, Result

from agentprov_core.errors import AgentprovError
from agentprov_core.live import keys
from agentprov_core.testing.memkeyring import FileTestKeyring, use_memory_keyring

FILE_BACKEND = "agentprov_core.testing.memkeyring.FileTestKeyring"
FAIL_BACKEND = "keyring.backends.fail.Keyring"
VAR = "OPENROUTER_API_KEY"
NO_CREDS = {"keychain": False, "env_file": None, "env_stdin": False}


def sentinel() -> str:
    return f"sk-SENTINEL-{uuid4().hex}"


@pytest.fixture
def kenv(tmp_path: Path, home: Path) -> dict[str, str]:
    """The environment of a subprocess with the test-only file keychain and a private HOME."""
    (tmp_path / "xdg").mkdir()
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(tmp_path / "xdg" / "config"),
            "XDG_DATA_HOME": str(tmp_path / "xdg" / "data"),
            "PYTHON_KEYRING_BACKEND": FILE_BACKEND,
            "AGENTPROV_TEST_KEYRING_FILE": str(tmp_path / "keyring.json")}


def fail_env(kenv: dict[str, str]) -> dict[str, str]:
    return {**kenv, "PYTHON_KEYRING_BACKEND": FAIL_BACKEND}


def written(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def assert_absent(value: str, root: Path, *outputs: str, allowed: tuple[Path, ...] = ()) -> None:
    """``value`` is in none of ``outputs`` and in no file under ``root`` but ``allowed``."""
    for out in outputs:
        assert value not in out
    allowed_rel = {str(p.relative_to(root)) for p in allowed}
    for rel, data in written(root).items():
        if rel not in allowed_rel:
            assert value.encode() not in data, f"the sentinel leaked into {rel}"


def stored(kenv: dict[str, str]) -> dict:
    p = Path(kenv["AGENTPROV_TEST_KEYRING_FILE"])
    return json.loads(p.read_text()) if p.exists() else {}


# A process that reads a key through keys.read_key as `agentprov run` will, and prints what
# the run may print: the Secret's repr and source, and a digest proving the value was read.
READER = r"""
import hashlib, json, sys
from agentprov_core.live import keys
from agentprov_core.errors import AgentprovError, render_json
var, options = sys.argv[1], json.loads(sys.argv[2])
try:
    s = keys.read_key(var, keys.KeySource(**options))
except AgentprovError as e:
    print(render_json(e, "run"), file=sys.stderr)
    sys.exit(e.exit_code)
print(json.dumps({"repr": repr(s), "str": str(s), "f": f"{s}", "source": s.source,
                  "notes": list(s.notes), "digest": s.digest_fields(),
                  "sha256": hashlib.sha256(s.reveal().encode()).hexdigest()}))
"""


def read_in_subprocess(var: str, options: dict, env: dict[str, str], *, cwd: Path,
                       stdin: str | None = None) -> Result:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTPROV_", "PYTHON_KEYRING"))}
    e.update(env)
    e["AGENTPROV_ERROR_FORMAT"] = "json"
    p = subprocess.run([sys.executable, "-c", READER, var, json.dumps({**NO_CREDS, **options})],
                       capture_output=True, text=True, env=e, cwd=cwd, input=stdin, timeout=60)
    return Result(p.returncode, p.stdout, p.stderr)


def sha(value: str) -> str:
    import hashlib

    return hashlib.sha256(value.encode()).hexdigest()


# ---------------------------------------------------------------- keys set, status, list
@pytest.mark.req("R-12.3", "R-12.4", "R-12.2")
def test_keys_set_stdin_stores_in_the_keychain_and_shows_names_only(cli, kenv, tmp_path):
    value = sentinel()
    r = cli("keys", "set", VAR, "--stdin", env=kenv, stdin=value + "\n")
    assert r.code == 0, r.err
    assert r.out.startswith(f"keys: stored {VAR} in the keychain ({FILE_BACKEND}, service agentprov)")
    assert stored(kenv) == {"agentprov": {VAR: value}}
    outputs = [r.out, r.err]
    r = cli("keys", "status", env=kenv)
    assert r.code == 0
    rows = {ln.split()[0]: ln.split()[1:] for ln in r.out.splitlines()[2:]}
    assert rows[VAR][:1] == ["set"] and rows["ANTHROPIC_API_KEY"][:2] == ["not", "set"]
    outputs += [r.out, r.err]
    r = cli("keys", "status", VAR, "--format", "json", env=kenv)
    assert json.loads(r.out) == {"backend": FILE_BACKEND, "service": "agentprov",
                                 "keys": [{"name": VAR, "set": True,
                                           "endpoints": ["openrouter"]}]}
    outputs += [r.out, r.err]
    r = cli("keys", "list", env=kenv)
    assert (r.code, r.out) == (0, f"{VAR}\n")
    outputs += [r.out, r.err]
    r = cli("keys", "list", "--format", "json", env=kenv)
    assert json.loads(r.out) == [VAR]
    outputs += [r.out, r.err]
    # a second set replaces, and says so
    value2 = sentinel()
    r = cli("keys", "set", VAR, "--stdin", env=kenv, stdin=value2)
    assert r.code == 0 and r.out.startswith(f"keys: replaced {VAR}")
    assert stored(kenv) == {"agentprov": {VAR: value2}}
    outputs += [r.out, r.err]
    keyring_file = Path(kenv["AGENTPROV_TEST_KEYRING_FILE"])
    for v in (value, value2):
        assert_absent(v, tmp_path, *outputs, allowed=(keyring_file,))


@pytest.mark.req("R-12.3", "R-12.2")
def test_keys_set_prompts_without_echo_on_a_real_terminal(kenv, home, tmp_path):
    """`keys set NAME` on a pseudo-terminal: the prompt appears, echo is off while the key
    is typed, and nothing the terminal shows holds the key."""
    value = sentinel()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTPROV_", "PYTHON_KEYRING"))}
    env.update(kenv, AGENTPROV_HOME=str(home))
    pid, master = pty.fork()
    if pid == 0:  # the child: its controlling terminal is the pty
        os.chdir(ROOT)
        os.execve(sys.executable, [sys.executable, "-m", "agentprov_core", "keys", "set", VAR],
                  env)
    transcript = b""
    typed = False
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            # once the prompt is shown, wait until the child has switched echo off
            # (getpass flushes input typed before that), then type the key
            if (not typed and b"(input hidden): " in transcript
                    and not termios.tcgetattr(master)[3] & termios.ECHO):
                os.write(master, value.encode() + b"\n")
                typed = True
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                transcript += chunk
    finally:
        until = time.monotonic() + 10
        done, status = os.waitpid(pid, os.WNOHANG)
        while done == 0 and time.monotonic() < until:
            time.sleep(0.05)
            done, status = os.waitpid(pid, os.WNOHANG)
        if done == 0:  # still waiting (e.g. for a key it never got): end it, never hang
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
        os.close(master)
    assert typed, transcript
    assert os.waitstatus_to_exitcode(status) == 0, transcript
    text = transcript.decode(errors="replace")
    assert f"{VAR} (input hidden): " in text
    assert f"keys: stored {VAR} in the keychain" in text
    assert stored(kenv) == {"agentprov": {VAR: value}}
    assert_absent(value, tmp_path, text, allowed=(Path(kenv["AGENTPROV_TEST_KEYRING_FILE"]),))


@pytest.mark.req("R-12.3", "R-12.2")
def test_keys_set_refusals_never_echo_the_value(cli, kenv, tmp_path):
    value = sentinel()
    # not a terminal and no --stdin: no prompt, no read
    r = cli("keys", "set", VAR, env=kenv, stdin=value)
    assert (r.code, r.error["error"]) == (2, "cli.usage.key_prompt")
    # two lines, a space inside, nothing
    r2 = cli("keys", "set", VAR, "--stdin", env=kenv, stdin=f"{value}\n{value}\n")
    assert (r2.code, r2.error["error"]) == (2, "cli.usage.key_value")
    assert "exactly one non-empty line (got 2)" in r2.error["message"]
    r3 = cli("keys", "set", VAR, "--stdin", env=kenv, stdin=f"{value} {value}\n")
    assert (r3.code, r3.error["error"]) == (2, "cli.usage.key_value")
    r4 = cli("keys", "set", VAR, "--stdin", env=kenv, stdin="\n")
    assert (r4.code, r4.error["error"]) == (2, "cli.usage.key_value")
    # a key pasted where the NAME goes is not echoed either
    r5 = cli("keys", "set", value, "--stdin", env=kenv, stdin="x\n")
    assert (r5.code, r5.error["error"]) == (2, "cli.usage.key_name")
    assert "'the name given' is not a key variable of registry/endpoints.toml" in r5.error["message"]
    assert "OPENROUTER_API_KEY" in r5.error["message"]
    r6 = cli("keys", "set", "MY_KEY", "--stdin", env=kenv, stdin=value)
    assert (r6.code, r6.error["error"]) == (2, "cli.usage.key_name")
    assert stored(kenv) == {}
    assert_absent(value, tmp_path, *(x.out + x.err for x in (r, r2, r3, r4, r5, r6)))


def test_keys_status_of_an_unknown_name_is_refused(cli, kenv):
    r = cli("keys", "status", "NOPE_KEY", env=kenv)
    assert (r.code, r.error["error"]) == (2, "cli.usage.key_name")


# ---------------------------------------------------------------- an unusable keychain
@pytest.mark.req("R-12.2")
def test_the_fail_backend_is_refused_clearly_by_every_keys_command(cli, kenv, tmp_path):
    env = fail_env(kenv)
    value = sentinel()
    results = [cli("keys", "set", VAR, "--stdin", env=env, stdin=value),
               cli("keys", "set", VAR, env=env),
               cli("keys", "status", env=env), cli("keys", "list", env=env)]
    for r in results:
        assert (r.code, r.error["error"]) == (3, "cli.environment.keychain_unavailable")
        msg = r.error["message"]
        assert "keyring.backends.fail.Keyring" in msg
        assert "never falls back to a plaintext store" in msg
        assert "--env-file PATH or --env-stdin" in msg
    r = cli("keys", "status", env=env, json_errors=False)
    assert r.err.startswith("agentprov: error [cli.environment.keychain_unavailable]: the OS "
                            "keychain cannot be used: keyring found no keychain backend")
    assert stored(kenv) == {}
    assert_absent(value, tmp_path, *(x.out + x.err for x in results))


def test_the_test_file_backend_is_unusable_without_its_variable(cli, kenv):
    env = {**kenv}
    del env["AGENTPROV_TEST_KEYRING_FILE"]
    r = cli("keys", "status", env=env)
    assert (r.code, r.error["error"]) == (3, "cli.environment.keychain_unavailable")
    assert "AGENTPROV_TEST_KEYRING_FILE is not set" in r.error["message"]


class PlaintextKeyring:  # named like keyrings.alt's plaintext store; not registered
    priority = 5           # with keyring (no KeyringBackend subclass), so keyring's own
                           # detection in this process never sees it


class LowPriorityKeyring:
    priority = 0.5


@pytest.mark.parametrize("make,needle", [
    (lambda: __import__("keyring.backends.fail").backends.fail.Keyring(),
     "only keyring.backends.fail.Keyring"),
    (lambda: __import__("keyring.backends.null").backends.null.Keyring(), "stores nothing"),
    (PlaintextKeyring, "plaintext or weakly protected store"),
    (LowPriorityKeyring, "priority 0.5 < 1"),
], ids=["fail", "null", "plaintext", "low-priority"])
def test_unusable_backends_are_refused(monkeypatch, make, needle):
    import keyring

    kr = make()
    monkeypatch.setattr(keyring, "get_keyring", lambda: kr)
    with pytest.raises(AgentprovError) as exc:
        keys.keychain()
    assert exc.value.code == "cli.environment.keychain_unavailable"
    assert needle in exc.value.message
    with pytest.raises(AgentprovError) as exc:
        keys.read_key(VAR, keys.KeySource(keychain=True))
    assert exc.value.code == "cli.environment.keychain_unavailable"


def test_a_chainer_with_nothing_real_to_chain_is_refused(monkeypatch):
    import keyring.core
    from keyring.backends import chainer

    monkeypatch.setattr(chainer.ChainerBackend, "backends", [], raising=False)
    with use_memory_keyring():
        keyring.core.set_keyring(chainer.ChainerBackend())
        with pytest.raises(AgentprovError) as exc:
            keys.keychain()
    assert "the chainer with no real backend" in exc.value.message


# ---------------------------------------------------------------- reading a key
@pytest.mark.req("R-12.6", "R-12.2")
def test_keychain_only(kenv, tmp_path):
    value, other = sentinel(), sentinel()
    FileTestKeyringStore(kenv).set(VAR, value)
    (tmp_path / ".env").write_text(f"{VAR}={other}\n")
    r = read_in_subprocess(VAR, {"keychain": True}, kenv, cwd=tmp_path)
    assert r.code == 0, r.err
    got = json.loads(r.out)
    assert got["source"] == "keychain" and got["sha256"] == sha(value)
    assert got["repr"] == got["str"] == got["f"] == f"Secret('{VAR}', ***, source='keychain')"
    assert got["digest"] == {"key_variable": VAR}
    # --keychain reads nothing else: a key only in .env is missing
    r2 = read_in_subprocess("ANTHROPIC_API_KEY", {"keychain": True}, kenv, cwd=tmp_path)
    assert (r2.code, r2.error["error"]) == (3, "cli.environment.credential")
    assert "--keychain reads nothing else" in r2.error["message"]
    # with the fail backend, --keychain is a refusal, not a fallback to .env
    r3 = read_in_subprocess(VAR, {"keychain": True}, fail_env(kenv), cwd=tmp_path)
    assert (r3.code, r3.error["error"]) == (3, "cli.environment.keychain_unavailable")
    allowed = (Path(kenv["AGENTPROV_TEST_KEYRING_FILE"]), tmp_path / ".env")
    for v in (value, other):
        assert_absent(v, tmp_path, r.out + r.err, r2.out + r2.err, r3.out + r3.err,
                      allowed=allowed)


class FileTestKeyringStore:
    """Put a value in the test keyring file the way `keys set` would."""

    def __init__(self, kenv: dict[str, str]) -> None:
        self.path = kenv["AGENTPROV_TEST_KEYRING_FILE"]

    def set(self, var: str, value: str) -> None:
        old = os.environ.get("AGENTPROV_TEST_KEYRING_FILE")
        os.environ["AGENTPROV_TEST_KEYRING_FILE"] = self.path
        try:
            FileTestKeyring().set_password(keys.SERVICE, var, value)
        finally:
            if old is None:
                del os.environ["AGENTPROV_TEST_KEYRING_FILE"]
            else:
                os.environ["AGENTPROV_TEST_KEYRING_FILE"] = old


ENV_TEXT = """\ufeff# a comment
export OPENAI_API_KEY='{a}'   # trailing comment
ANTHROPIC_API_KEY = "{b}"
   # an indented comment

OPENROUTER_API_KEY={c} # comment
GEMINI_API_KEY="with \\"escapes\\" and a # hash"
DEEPSEEK_API_KEY=
"""


@pytest.mark.req("R-12.6", "R-12.2")
def test_env_file_only(kenv, tmp_path):
    a, b, c, k = sentinel(), sentinel(), sentinel(), sentinel()
    FileTestKeyringStore(kenv).set(VAR, k)
    env_file = tmp_path / "keys.env"
    env_file.write_text(ENV_TEXT.format(a=a, b=b, c=c))
    results = []
    for var, value in (("OPENAI_API_KEY", a), ("ANTHROPIC_API_KEY", b), (VAR, c)):
        r = read_in_subprocess(var, {"env_file": str(env_file)}, kenv, cwd=tmp_path)
        assert r.code == 0, r.err
        got = json.loads(r.out)
        assert (got["source"], got["sha256"]) == ("env-file", sha(value))
        assert got["repr"] == f"Secret('{var}', ***, source='env-file')"
        results.append(r)
    assert keys.parse_env(ENV_TEXT.format(a=a, b=b, c=c), "x")["GEMINI_API_KEY"] == \
        'with "escapes" and a # hash'
    # an empty value, and a variable the file lacks, are missing keys (exit 3)
    for var, needle in (("DEEPSEEK_API_KEY", "DEEPSEEK_API_KEY is empty in"),
                        ("LLAMA_API_KEY", "LLAMA_API_KEY is not set in")):
        r = read_in_subprocess(var, {"env_file": str(env_file)}, kenv, cwd=tmp_path)
        assert (r.code, r.error["error"]) == (3, "cli.environment.credential")
        assert needle in r.error["message"]
        assert f"agentprov keys set {var}, or give --env-file PATH" in r.error["message"]
        results.append(r)
    # a missing file is a usage error
    r = read_in_subprocess(VAR, {"env_file": str(tmp_path / "nope.env")}, kenv, cwd=tmp_path)
    assert (r.code, r.error["error"]) == (2, "cli.usage.env_file")
    results.append(r)
    allowed = (Path(kenv["AGENTPROV_TEST_KEYRING_FILE"]), env_file)
    for v in (a, b, c, k):
        assert_absent(v, tmp_path, *(x.out + x.err for x in results), allowed=allowed)


@pytest.mark.parametrize("line,what", [
    ("{v}", "expected NAME=VALUE (the line has no '=')"),
    ("{v}=x", "the text before '=' is not a variable name"),
    ('KEY="{v}', "a double-quoted value is not closed on its line"),
    ("KEY='{v}", "a single-quoted value is not closed on its line"),
    ("KEY='x' {v}", "unexpected text after the closing quote of KEY"),
])
def test_env_file_syntax_errors_name_file_and_line_never_the_value(tmp_path, line, what):
    value = sentinel()
    f = tmp_path / "bad.env"
    f.write_text(f"# first\nGOOD=1\n{line.format(v=value)}\n")
    with pytest.raises(AgentprovError) as exc:
        keys.read_env_file(f)
    assert exc.value.code == "cli.usage.env_file_syntax" and exc.value.exit_code == 2
    assert exc.value.message == f"{f}:3: {what}" or exc.value.message.startswith(f"{f}:3: {what}")
    assert value not in exc.value.message and value not in str(exc.value)


def test_env_file_not_utf8_or_a_directory(tmp_path):
    f = tmp_path / "latin.env"
    f.write_bytes(b"KEY=caf\xe9\n")
    with pytest.raises(AgentprovError) as exc:
        keys.read_env_file(f)
    assert exc.value.message == f"{f}: is not UTF-8 text"
    with pytest.raises(AgentprovError) as exc:
        keys.read_env_file(tmp_path)
    assert exc.value.code == "cli.usage.env_file_syntax"
    assert exc.value.message == f"{tmp_path}: is a directory, not a file"


@pytest.mark.req("R-12.6", "R-12.2")
def test_env_stdin_only(kenv, tmp_path):
    value, k, e = sentinel(), sentinel(), sentinel()
    FileTestKeyringStore(kenv).set("ANTHROPIC_API_KEY", k)
    (tmp_path / ".env").write_text(f"ANTHROPIC_API_KEY={e}\n")
    obj = json.dumps({VAR: value, "OMLX_MODEL": "m"})
    r = read_in_subprocess(VAR, {"env_stdin": True}, kenv, cwd=tmp_path, stdin=obj)
    assert r.code == 0, r.err
    got = json.loads(r.out)
    assert (got["source"], got["sha256"]) == ("env-stdin", sha(value))
    assert got["repr"] == f"Secret('{VAR}', ***, source='env-stdin')"
    # --env-stdin reads nothing else, though the keychain and ./.env hold the key
    r2 = read_in_subprocess("ANTHROPIC_API_KEY", {"env_stdin": True}, kenv, cwd=tmp_path,
                            stdin=obj)
    assert (r2.code, r2.error["error"]) == (3, "cli.environment.credential")
    assert "not in the --env-stdin object" in r2.error["message"]
    results = [r, r2]
    for bad, what in ((f"[\"{value}\"]", "expected one JSON object of variables, got a JSON list"),
                      (f"{{\"{VAR}\": \"{value}\"", "not JSON"),
                      (f"{{\"{value}\": \"x\"}}", "a member name is not a variable name"),
                      (f"{{\"{VAR}\": [\"{value}\"]}}", f"the value of {VAR} is not a JSON string"),
                      ("", "stdin was empty")):
        rb = read_in_subprocess(VAR, {"env_stdin": True}, kenv, cwd=tmp_path, stdin=bad)
        assert (rb.code, rb.error["error"]) == (2, "cli.usage.env_stdin"), rb.err
        assert what in rb.error["message"]
        results.append(rb)
    allowed = (Path(kenv["AGENTPROV_TEST_KEYRING_FILE"]), tmp_path / ".env")
    for v in (value, k, e):
        assert_absent(v, tmp_path, *(x.out + x.err for x in results), allowed=allowed)


def test_env_stdin_is_read_once_and_shared_with_read_variable():
    value = sentinel()
    stream = io.StringIO(json.dumps({VAR: value, "OMLX_MODEL": "Qwen3.5-4B-MLX-4bit"}))
    opts = keys.KeySource(env_stdin=True)
    assert keys.read_key(VAR, opts, stdin=stream).reveal() == value
    assert keys.read_variable("OMLX_MODEL", opts, stdin=stream) == "Qwen3.5-4B-MLX-4bit"
    assert keys.read_variable("LOCAL_MODEL_ID", opts, stdin=stream) is None


@pytest.mark.req("R-12.1", "R-12.2")
def test_default_order_keychain_then_dot_env(kenv, tmp_path):
    in_keychain, in_env = sentinel(), sentinel()
    (tmp_path / ".env").write_text(f"{VAR}={in_env}\nANTHROPIC_API_KEY={in_env}\n")
    FileTestKeyringStore(kenv).set(VAR, in_keychain)
    results = []
    r = read_in_subprocess(VAR, {}, kenv, cwd=tmp_path)
    assert json.loads(r.out)["source"] == "keychain"
    assert json.loads(r.out)["sha256"] == sha(in_keychain)
    results.append(r)
    r = read_in_subprocess("ANTHROPIC_API_KEY", {}, kenv, cwd=tmp_path)
    assert (json.loads(r.out)["source"], json.loads(r.out)["sha256"]) == ("env-file", sha(in_env))
    results.append(r)
    # no keychain on this machine: the order skips it, says so, and reads ./.env
    r = read_in_subprocess(VAR, {}, fail_env(kenv), cwd=tmp_path)
    got = json.loads(r.out)
    assert (got["source"], got["sha256"]) == ("env-file", sha(in_env))
    assert got["notes"][0].startswith("the keychain was skipped: keyring found no keychain")
    results.append(r)
    # neither: a missing key (exit 3) that names both places and the fix
    r = read_in_subprocess("GEMINI_API_KEY", {}, kenv, cwd=tmp_path)
    assert (r.code, r.error["error"]) == (3, "cli.environment.credential")
    assert r.error["message"] == (
        "agentprov: error [cli.environment.credential]: no key GEMINI_API_KEY: it is not in "
        f"the keychain ({FILE_BACKEND}, service agentprov); it is not set in "
        f"{tmp_path / '.env'}; store it with agentprov keys set GEMINI_API_KEY, or give "
        "--env-file PATH (or --env-stdin)")
    results.append(r)
    allowed = (Path(kenv["AGENTPROV_TEST_KEYRING_FILE"]), tmp_path / ".env")
    for v in (in_keychain, in_env):
        assert_absent(v, tmp_path, *(x.out + x.err for x in results), allowed=allowed)


@pytest.mark.req("R-12.8", "R-14.7", "R-29.6")
def test_a_missing_key_exits_3_with_the_fix(kenv, tmp_path):
    r = read_in_subprocess(VAR, {}, fail_env(kenv), cwd=tmp_path)
    assert (r.code, r.error["error"]) == (3, "cli.environment.credential")
    assert r.error["message"] == (
        f"agentprov: error [cli.environment.credential]: no key {VAR}: the keychain was "
        "skipped: keyring found no keychain backend on this machine (only keyring.backends."
        "fail.Keyring: no macOS Keychain, Secret Service, KWallet or Windows vault); there "
        f"is no .env in the current directory; store it with agentprov keys set {VAR}, or "
        "give --env-file PATH (or --env-stdin)")
    assert r.out == ""


# ---------------------------------------------------------------- exclusivity
@pytest.mark.req("R-12.7")
@pytest.mark.parametrize("first,second", [
    (("--keychain",), ("--env-file", "x.env")),
    (("--keychain",), ("--env-stdin",)),
    (("--env-file", "x.env"), ("--env-stdin",)),
])
def test_credential_options_are_exclusive(cli, corpora, home, first, second):
    r = cli("run", "agentdojo", "--dry-run", "--corpus", corpora / "c", "--campaign", "c",
            "--suite", "banking", "--model", "openrouter", "--model-id", "m",
            *first, *second, stdin="{}")
    assert (r.code, r.error["error"]) == (2, "cli.usage.exclusive")
    assert r.error["message"] == f"agentprov run: {first[0]} and {second[0]} cannot be used together"
    assert list(corpora.iterdir()) == [] and written(home) == {}


@pytest.mark.req("R-12.7", "R-14.2")
def test_read_key_guards_the_same_combinations():
    with pytest.raises(AgentprovError) as exc:
        keys.read_key(VAR, keys.KeySource(keychain=True, env_stdin=True))
    assert (exc.value.code, exc.value.exit_code) == ("cli.usage.exclusive", 2)
    with pytest.raises(AgentprovError) as exc:
        keys.read_key(VAR, keys.KeySource(env_file="x.env", scripted=True))
    assert (exc.value.code, exc.value.exit_code) == ("cli.usage.script_credential", 2)


# ---------------------------------------------------------------- the Secret, in process
@pytest.mark.req("R-12.2")
def test_a_secret_never_shows_its_value(capfd):
    value = sentinel()
    with use_memory_keyring() as kr:
        kr.set_password(keys.SERVICE, VAR, value)
        s = keys.read_key(VAR, keys.KeySource(keychain=True))
    assert s.reveal() == value and (s.name, s.source) == (VAR, "keychain")
    shown = [repr(s), str(s), f"{s}", f"{s!r}", "%s" % s,  # noqa: UP031 - the old way too
             format(s, ">80"), repr([s]), repr({"k": s})]
    for text in shown:
        assert value not in text and "***" in text
    with pytest.raises(TypeError):
        pickle.dumps(s)
    with pytest.raises(TypeError):
        json.dumps(s)
    assert copy.copy(s) is s and copy.deepcopy({"s": s})["s"] is s
    assert s.digest_fields() == {"key_variable": VAR}
    with pytest.raises(AttributeError):
        s.__dict__  # noqa: B018 - slots only: vars() cannot reach the value
    out, err = capfd.readouterr()
    assert value not in out + err


def test_keys_imports_no_keyring_until_used():
    code = ("import sys, agentprov_core.live.keys, agentprov_core.cli.keys_cmd, "
            "agentprov_core.cli.main; print('keyring' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert p.stdout.strip() == "False"


def test_key_variables_come_from_the_endpoint_registry():
    known = keys.key_variables()
    assert known[VAR] == ["openrouter"]
    assert known["OMLX_API_KEY"] == ["omlx"]  # an optional key is a key variable too
    assert "LOCAL_MODEL_ID" not in known
