"""Endpoint keys: read from the OS keychain, a ``.env`` file or ``--env-stdin``; never shown.

The API ``agentprov run`` calls at step 3 of the order of checks (after the API caps
check, before the endpoint URL check, R-16.3)::

    from agentprov_core.live import keys

    secret = keys.read_key(endpoint.key, options.keys)   # a Secret, or an AgentprovError
    headers = {"Authorization": "Bearer " + secret.reveal()}   # only where it is sent
    agent["key_variables"] = [secret.name]          # the configuration digest: the name only

``read_key(var, src, *, stdin=None) -> Secret`` reads the key variable ``var``
(``OPENROUTER_API_KEY``, as ``registry/endpoints.toml`` names it) from the source the run
options choose: ``src`` is a :class:`KeySource` (``agentprov run``'s options give theirs as
``options.keys``), whose fields are ``keychain`` (bool), ``env_file`` (a path or None) and
``env_stdin`` (bool):

* ``--keychain``: the OS keychain only (``keyring``, service :data:`SERVICE`, the user name
  is the variable name);
* ``--env-file PATH``: that file only;
* ``--env-stdin``: one JSON object of variables on stdin (``stdin``, default
  ``sys.stdin``; read once per stream and cached, so a later :func:`read_variable` reads
  the same object);
* none of them: the keychain, then ``./.env`` in the current directory (R-12.1). An
  unusable keychain is skipped in this order (the reason is kept in ``Secret.notes`` and
  in the missing-key message); with ``--keychain`` it is a refusal.

The three options are exclusive with each other and with ``--llm-script``;
``runrequest.check_usage`` refuses those combinations (exit 2) before a key is read, and
``read_key`` only guards against a caller that skipped it. The process environment is never
read: ``OPENROUTER_API_KEY=... agentprov run`` does not pass a key (use ``--env-stdin``).

Refusals (never with a value in the message): a missing or empty key,
``cli.environment.credential`` (exit 3); a keychain that is only a failing, null, plaintext
or otherwise unrecommended backend, ``cli.environment.keychain_unavailable`` (exit 3: there
is no silent fallback to a plaintext store); a malformed ``.env``,
``cli.usage.env_file_syntax`` naming ``file:line``; a malformed ``--env-stdin`` object,
``cli.usage.env_stdin``; a missing ``--env-file``, ``cli.usage.env_file`` (all exit 2).

:func:`read_variable` reads a non-secret variable (``OMLX_MODEL``, ``LOCAL_MODEL_ID``) from
``--env-stdin``, ``--env-file`` or ``./.env``, never the keychain (the keychain holds keys
only). The ``keys`` command uses :func:`keychain`, :func:`key_variables`,
:func:`keychain_has` and :func:`store_key`.

``keyring`` is imported inside the functions, so ``agentprov --help`` never pays for it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

import msgspec

from agentprov_core.errors import AgentprovError

#: The keychain service every key is stored under; the user name is the variable name.
SERVICE = "agentprov"
SOURCES = ("keychain", "env-file", "env-stdin")
#: The .env file read when no credential option is given (after the keychain).
DEFAULT_ENV_FILE = ".env"
#: Set only by tests: the file the test-only keyring backend stores in.
TEST_KEYRING_FILE_VAR = "AGENTPROV_TEST_KEYRING_FILE"

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEY_NAME = re.compile(r"[A-Z][A-Z0-9_]*")

#: the options that name where a key is read from (at most one of them)
CREDENTIALS = (("keychain", "--keychain"), ("env_file", "--env-file"), ("env_stdin", "--env-stdin"))


class KeySource(msgspec.Struct, frozen=True, kw_only=True):
    """Where a key is read from: the key options, and whether the run is scripted (whose
    transport takes no key)."""

    keychain: bool = False
    env_file: str | None = None
    env_stdin: bool = False
    scripted: bool = False



class Secret:
    """A key's value with its variable name and its source. ``repr``, ``str`` and format
    never show the value; it cannot be pickled or copied into a serialiser by accident.
    :meth:`reveal` is the one way to the value."""

    __slots__ = ("_location", "_name", "_notes", "_source", "_value")

    def __init__(self, name: str, value: str, source: str, location: str | None = None,
                 notes: tuple[str, ...] = ()) -> None:
        if source not in SOURCES:
            raise ValueError(f"unknown key source {source!r}")
        self._name, self._value, self._source = name, value, source
        self._location, self._notes = location, notes

    @property
    def name(self) -> str:
        """The variable name, e.g. ``OPENROUTER_API_KEY``: what the digest records."""
        return self._name

    @property
    def source(self) -> str:
        """``keychain``, ``env-file`` or ``env-stdin``."""
        return self._source

    @property
    def location(self) -> str | None:
        """The .env file's path for ``env-file``; None otherwise."""
        return self._location

    @property
    def notes(self) -> tuple[str, ...]:
        """What was skipped on the way (e.g. an unusable keychain); never a value."""
        return self._notes

    def reveal(self) -> str:
        """The value. Call it only where the key is sent."""
        return self._value

    def digest_fields(self) -> dict[str, str]:
        """What the configuration digest records of a key: its variable name only."""
        return {"key_variable": self._name}

    def __repr__(self) -> str:
        return f"Secret({self._name!r}, ***, source={self._source!r})"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return format(repr(self), spec)

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        raise TypeError("a Secret is never pickled or serialised")

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: dict) -> Secret:
        return self


# --- .env files ----------------------------------------------------------------------


def _syntax(location: str, what: str) -> NoReturn:
    raise AgentprovError("cli.usage.env_file_syntax", location=location, what=what)


def _quoted(rest: str, location: str) -> tuple[str, str]:
    """The value of a quoted ``rest`` and the text after its closing quote."""
    quote = rest[0]
    if quote == "'":
        end = rest.find("'", 1)
        if end < 0:
            _syntax(location, "a single-quoted value is not closed on its line "
                              "(multi-line values are not supported)")
        return rest[1:end], rest[end + 1:]
    out: list[str] = []
    i = 1
    while i < len(rest):
        c = rest[i]
        if c == "\\" and i + 1 < len(rest):
            nxt = rest[i + 1]
            out.append({"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\",
                        "$": "$"}.get(nxt, "\\" + nxt))
            i += 2
            continue
        if c == '"':
            return "".join(out), rest[i + 1:]
        out.append(c)
        i += 1
    _syntax(location, "a double-quoted value is not closed on its line "
                      "(multi-line values are not supported)")


def parse_env(text: str, origin: str) -> dict[str, str]:
    """The variables of a .env file's text. ``origin`` names the file in errors, which
    give ``origin:line`` and what is wrong, never the line's text (it may hold a key).

    Accepted: blank lines; ``#`` comments; ``NAME=VALUE`` with an optional ``export``
    prefix and spaces around ``=``; values unquoted (trimmed, a `` #`` starts a comment),
    single-quoted (literal) or double-quoted (``\\n \\t \\r \\" \\\\ \\$`` escapes). No
    variable expansion. A later line wins over an earlier one for the same name."""
    out: dict[str, str] = {}
    if text.startswith("\ufeff"):
        text = text[1:]
    for lineno, raw in enumerate(text.splitlines(), 1):
        location = f"{origin}:{lineno}"
        if "\0" in raw:  # no environment variable can hold one
            _syntax(location, "the line holds a NUL character")
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("export ", "export\t")):
            line = line[len("export"):].lstrip()
        name, sep, rest = line.partition("=")
        name = name.strip()
        if not sep:
            _syntax(location, "expected NAME=VALUE (the line has no '=')")
        if not _NAME.fullmatch(name):
            _syntax(location, "the text before '=' is not a variable name "
                              "(letters, digits and _, not starting with a digit)")
        rest = rest.strip()
        if rest[:1] in ("'", '"'):
            value, after = _quoted(rest, location)
            after = after.strip()
            if after and not after.startswith("#"):
                _syntax(location, f"unexpected text after the closing quote of {name}")
        else:
            value = re.split(r"\s#", rest, maxsplit=1)[0].strip()
        out[name] = value
    return out


def read_env_file(path: str | Path) -> dict[str, str]:
    """The variables of the .env file ``path`` (exit 2 when missing, unreadable or
    malformed)."""
    from agentprov_core.base import inputfile, paths

    p = Path(path)
    shown = paths.display(p)
    if not p.exists():
        raise AgentprovError("cli.usage.env_file", path=str(path))
    try:
        data = inputfile.read_bytes(p)
    except inputfile.Unreadable as exc:
        _syntax(shown, str(exc))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        _syntax(shown, "is not UTF-8 text")
    return parse_env(text, shown)


# --- --env-stdin -----------------------------------------------------------------------

_stdin_cache: list[tuple[Any, dict[str, str]]] = []


def _stdin_error(what: str) -> NoReturn:
    raise AgentprovError("cli.usage.env_stdin", what=what)


def read_env_stdin(stream: Any = None) -> dict[str, str]:
    """The one JSON object of variables on ``stream`` (default ``sys.stdin``). A stream is
    read once; later calls with the same stream return the same object."""
    stream = sys.stdin if stream is None else stream
    for s, variables in _stdin_cache:
        if s is stream:
            return variables
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        _stdin_error("stdin is a terminal; pipe one JSON object of variables into it")
    data = stream.read()
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            _stdin_error("stdin is not UTF-8 text")
    if not data.strip():
        _stdin_error("stdin was empty; expected one JSON object of variables")
    from agentprov_core.base import inputfile

    try:
        inputfile.check_json_depth(data)
        obj = json.loads(data)
    except json.JSONDecodeError as exc:
        _stdin_error(f"not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})")
    except inputfile.Unreadable as exc:
        _stdin_error(f"not one object of variables: it {exc}")
    except ValueError as exc:  # a number of more than 4,300 digits
        _stdin_error(f"not JSON ({inputfile.number_error(exc)})")
    except RecursionError:
        _stdin_error(f"not one object of variables: it nests more than "
                     f"{inputfile.MAX_DEPTH} levels deep")
    if not isinstance(obj, dict):
        _stdin_error(f"expected one JSON object of variables, got a JSON {type(obj).__name__}")
    variables: dict[str, str] = {}
    for k, v in obj.items():
        if not _NAME.fullmatch(k):
            _stdin_error("a member name is not a variable name "
                         "(letters, digits and _, not starting with a digit)")
        if not isinstance(v, str):
            _stdin_error(f"the value of {k} is not a JSON string")
        if "\0" in v:
            _stdin_error(f"the value of {k} holds a NUL character")
        variables[k] = v
    _stdin_cache.append((stream, variables))
    return variables


# --- the keychain ----------------------------------------------------------------------


def backend_name(kr: object) -> str:
    return f"{type(kr).__module__}.{type(kr).__qualname__}"


def _why_unusable(kr: Any) -> str | None:
    """Why the keyring backend ``kr`` is refused, or None when it is a real keychain."""
    from keyring.backends import chainer, fail, null

    name = backend_name(kr)
    if isinstance(kr, fail.Keyring):
        return ("keyring found no keychain backend on this machine (only keyring.backends."
                "fail.Keyring: no macOS Keychain, Secret Service, KWallet or Windows vault)")
    if isinstance(kr, null.Keyring):
        return "the keyring backend is keyring.backends.null.Keyring, which stores nothing"
    if isinstance(kr, chainer.ChainerBackend):
        members = list(kr.backends)
        if not members:
            return ("the keyring backend is the chainer with no real backend to chain "
                    "(no macOS Keychain, Secret Service, KWallet or Windows vault)")
        for m in members:
            why = _why_unusable(m)
            if why:
                return f"the chainer includes {backend_name(m)}: {why}"
        return None
    if getattr(type(kr), "agentprov_test_backend", False):
        return None  # agentprov_core.testing.memkeyring: only ever selected by tests
    lowered = name.lower()
    if name.startswith("keyrings.alt") or "plaintext" in lowered or "plain_text" in lowered:
        return (f"the keyring backend is {name}, a plaintext or weakly protected store "
                "(keyrings.alt)")
    try:
        priority = float(type(kr).priority)
    except Exception as exc:  # a backend that is not viable here raises from priority
        return f"the keyring backend {name} is not usable here ({type(exc).__name__})"
    if priority < 1:
        return (f"the keyring backend is {name}, which keyring itself does not recommend "
                f"(priority {priority:g} < 1)")
    return None


def keychain() -> Any:
    """The active keyring backend, when it is a real keychain; else
    ``cli.environment.keychain_unavailable`` (exit 3)."""
    try:
        import keyring

        kr = keyring.get_keyring()
    except Exception as exc:  # PYTHON_KEYRING_BACKEND or keyringrc.cfg names a bad backend
        raise AgentprovError("cli.environment.keychain_unavailable",
                             why=f"keyring could not load its backend "
                                 f"({type(exc).__name__}: {exc})") from None
    why = _why_unusable(kr)
    if why:
        raise AgentprovError("cli.environment.keychain_unavailable", why=why)
    return kr


def _keychain_get(kr: Any, var: str) -> str | None:
    try:
        return kr.get_password(SERVICE, var)
    except Exception as exc:  # a locked or unreachable keychain; nothing of a value here
        raise AgentprovError("cli.environment.keychain_unavailable",
                             why=f"reading {var} from {backend_name(kr)} failed "
                                 f"({type(exc).__name__}: {exc})") from None


def keychain_has(var: str, kr: Any = None) -> bool:
    """Whether the keychain holds a non-empty value for ``var`` (the value is dropped)."""
    value = _keychain_get(kr if kr is not None else keychain(), var)
    return bool(value and value.strip())


def store_key(var: str, value: str, kr: Any = None) -> str:
    """Store ``value`` under ``var`` in the keychain; returns the backend's name."""
    kr = kr if kr is not None else keychain()
    try:
        kr.set_password(SERVICE, var, value)
    except Exception as exc:  # the message of a failed write could echo what was written
        raise AgentprovError("cli.environment.keychain_unavailable",
                             why=f"storing {var} in {backend_name(kr)} failed "
                                 f"({type(exc).__name__})") from None
    return backend_name(kr)


def key_variables(registry: dict | None = None) -> dict[str, list[str]]:
    """Each key variable the endpoint registry names (``key`` or ``optional_key``), with
    the endpoints that use it, sorted."""
    from agentprov_core.live import endpoints

    reg = registry if registry is not None else endpoints.load()
    out: dict[str, list[str]] = {}
    for name, ep in sorted(reg.items()):
        for var in (ep.key, ep.optional_key):
            if var:
                out.setdefault(var, []).append(name)
    return dict(sorted(out.items()))


def check_key_name(name: str, registry: dict | None = None) -> list[str]:
    """The endpoints that use the key variable ``name``; ``cli.usage.key_name`` (exit 2)
    when the endpoint registry names no such key variable."""
    from agentprov_core.base import paths
    from agentprov_core.live import endpoints

    known = key_variables(registry)
    if name not in known:
        shown = name if _KEY_NAME.fullmatch(name) and len(name) <= 64 else "the name given"
        raise AgentprovError("cli.usage.key_name", name=shown,
                             registry=paths.display(endpoints.endpoints_file()),
                             known=", ".join(known))
    return known[name]


# --- reading a key ---------------------------------------------------------------------


def _mode(src: KeySource) -> str | None:
    chosen = [(name, flag) for name, flag in CREDENTIALS if getattr(src, name)]
    if len(chosen) > 1:  # check_usage refuses this first; a guard for other callers
        raise AgentprovError("cli.usage.exclusive", first=chosen[0][1], second=chosen[1][1])
    if src.scripted and chosen:
        raise AgentprovError("cli.usage.script_credential", flag=chosen[0][1])
    return chosen[0][0] if chosen else None


def _missing(var: str, searched: list[str]) -> NoReturn:
    raise AgentprovError("cli.environment.credential", variable=var,
                         searched="; ".join(searched))


def _present(value: str | None) -> bool:
    return bool(value and value.strip())


def _checked(secret: Secret, where: str) -> Secret:
    """``secret`` when its value is one line without spaces or control characters (it is
    sent in a header); else ``cli.usage.key_value`` (exit 2), naming where it was read."""
    if any(c.isspace() or not c.isprintable() for c in secret.reveal().strip()):
        raise AgentprovError("cli.usage.key_value", variable=secret.name,
                             what=f"{where} holds spaces or control characters inside")
    return secret


def read_key(var: str, src: KeySource, *, stdin: Any = None) -> Secret:
    """The key ``var`` from the source ``src`` names (see the module docstring)."""
    from agentprov_core.base import paths

    mode = _mode(src)
    if mode == "env_stdin":
        value = read_env_stdin(stdin).get(var)
        if not _present(value):
            _missing(var, [f"{var} is {'empty' if value is not None else 'not'} "
                           "in the --env-stdin object"])
        return _checked(Secret(var, value, "env-stdin"), "in the --env-stdin object")
    if mode == "env_file":
        path = Path(src.env_file or "")
        shown = paths.display(path)
        value = read_env_file(path).get(var)
        if not _present(value):
            _missing(var, [f"{var} is {'empty' if value is not None else 'not set'} in {shown}"])
        return _checked(Secret(var, value, "env-file", location=str(path)), f"in {shown}")
    if mode == "keychain":
        kr = keychain()
        value = _keychain_get(kr, var)
        if not _present(value):
            _missing(var, [f"it is not in the keychain ({backend_name(kr)}, service "
                           f"{SERVICE}), and --keychain reads nothing else"])
        return _checked(Secret(var, value, "keychain"), "in the keychain")
    # the specification's order: the keychain, then ./.env
    searched: list[str] = []
    notes: list[str] = []
    try:
        kr = keychain()
    except AgentprovError as exc:
        if exc.code != "cli.environment.keychain_unavailable":
            raise
        reason = f"the keychain was skipped: {exc.params['why']}"
        searched.append(reason)
        notes.append(reason)
    else:
        value = _keychain_get(kr, var)
        if _present(value):
            return _checked(Secret(var, value, "keychain"), "in the keychain")
        searched.append(f"it is not in the keychain ({backend_name(kr)}, service {SERVICE})")
    dotenv = Path(DEFAULT_ENV_FILE)
    if dotenv.is_file():
        value = read_env_file(dotenv).get(var)
        if _present(value):
            return _checked(Secret(var, value, "env-file", location=str(dotenv.absolute()),
                                   notes=tuple(notes)), f"in {dotenv.absolute()}")
        searched.append(f"it is {'empty' if value is not None else 'not set'} in "
                        f"{dotenv.absolute()}")
    else:
        searched.append(f"there is no {DEFAULT_ENV_FILE} in the current directory")
    _missing(var, searched)


def read_variable(var: str, src: KeySource, *, stdin: Any = None) -> str | None:
    """A non-secret variable (``OMLX_MODEL``, ``LOCAL_MODEL_ID``) from ``--env-stdin``,
    ``--env-file`` or ``./.env`` (with ``--keychain`` too: the keychain holds keys only);
    None when it is not set."""
    mode = _mode(src)
    if mode == "env_stdin":
        return read_env_stdin(stdin).get(var)
    if mode == "env_file":
        return read_env_file(src.env_file or "").get(var)
    dotenv = Path(DEFAULT_ENV_FILE)
    return read_env_file(dotenv).get(var) if dotenv.is_file() else None
