"""A fixture fork of AutoDojo for tests: agentdojo 0.1.35's own code laid out as the fork's
tree (``src/agentdojo/…``, ``pyproject.toml``, ``LICENSE``, ``README.md``), plus the fork's
three attacks as stand-ins and an attack cache file, committed to a git repository.

The real fork (``aa458794``) is not public. What its code is, is unknown here; what is known
is that it is a fork of AgentDojo 0.1.35 that installs as ``agentdojo`` and registers the
attacks ``autodojo``, ``ours`` and ``variant_generation``. So the fixture is AgentDojo's
released code, taken from its PyPI wheel with uv (``uv pip install --no-deps --target``,
the wheel verified against the sha256 that ``backends/agentdojo/uv.lock`` records; from uv's
cache when it holds it), in the layout of agentdojo's own source tree:

- ``src/agentdojo/``: the wheel's package, file for file;
- ``LICENSE``: the wheel's ``licenses/LICENSE``; ``README.md``: its ``METADATA`` body (the
  readme hatchling copied in);
- ``pyproject.toml``: agentdojo 0.1.35's declared project, from the wheel's ``METADATA``
  (name, version, description, requires-python, dependencies, the ``transformers`` extra)
  with its build backend (hatchling, ``src/agentdojo``);
- ``src/agentdojo/attacks/fork_fixture_attacks.py``: ``autodojo``, ``ours`` and
  ``variant_generation``, registered by one import line added to ``attacks/__init__.py``;
  each is AgentDojo's ``direct`` attack under another name (a stand-in: the fork's own
  attacks are not known here);
- :data:`CACHE_PATH`: an attack cache file of the shape ``--autodojo-cache`` reads.

``backends/autodojo/uv.lock`` was locked against this tree's ``pyproject.toml``
(backends/autodojo/README.md), so the fixture builds under ``uv sync --locked``.
"""

from __future__ import annotations

import email
import json
import re
import subprocess
import tempfile
import tomllib
from pathlib import Path

from agentprov_core.testing.gitrepo import make_repo

#: the attack cache file the fixture's tree holds
CACHE_PATH = "src/agentdojo/attacks/cache/banking.json"
CACHE = {"injection_tasks": {
    "injection_task_0": {"injection_bill_text": ["v0", "v1", "v2"],
                         "injection_incoming_transaction": ["w0"]},
    "injection_task_1": {"injection_bill_text": ["x0", None, "x2"]}}}
#: the fork's own attacks, registered by the fixture as stand-ins
FORK_ATTACKS = {"autodojo": "AutoDojoCacheAttack", "ours": "OursAttack",
                "variant_generation": "VariantGenerationAttack"}
VERSION = "0.1.35"


def cache_bytes(doc: dict = CACHE) -> bytes:
    return json.dumps(doc, indent=1).encode()


def _wheel_hash(agentdojo_lock: Path) -> str:
    lock = tomllib.loads(agentdojo_lock.read_text(encoding="utf-8"))
    (pkg,) = [p for p in lock["package"] if p["name"] == "agentdojo"]
    assert pkg["version"] == VERSION, pkg["version"]
    (wheel,) = pkg["wheels"]
    return wheel["hash"]


def install_wheel(uv: str, python: str, agentdojo_lock: Path, target: Path) -> Path:
    """agentdojo 0.1.35's wheel, hash-checked against ``agentdojo_lock``, unpacked into
    ``target`` by uv (from its cache, else PyPI). Returns ``target``."""
    with tempfile.TemporaryDirectory() as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text(f"agentdojo=={VERSION} --hash={_wheel_hash(agentdojo_lock)}\n")
        subprocess.run([uv, "pip", "install", "--no-config", "--no-deps", "--only-binary",
                        ":all:", "--require-hashes", "--python", python, "--target",
                        str(target), "-r", str(req)], check=True, capture_output=True,
                       env=_uv_env())
    return target


def _uv_env() -> dict[str, str]:
    """This environment without uv's settings but its cache's (as a build runs uv)."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_") or k == "UV_CACHE_DIR"}
    return env | {"UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}


def pyproject_of(metadata: email.message.Message) -> str:
    """agentdojo's declared project, as its ``METADATA`` states it."""
    deps, extras = [], {}
    for req in metadata.get_all("Requires-Dist") or []:
        spec, _, marker = req.partition(";")
        m = re.fullmatch(r"\s*extra\s*==\s*'([^']+)'\s*", marker) if marker else None
        if marker and m is None:
            raise ValueError(f"an unexpected marker in agentdojo's METADATA: {req}")
        (extras.setdefault(m.group(1), []) if m else deps).append(spec.strip())
    q = json.dumps
    lines = ["[project]", f"name = {q(metadata['Name'])}", f"version = {q(metadata['Version'])}",
             f"description = {q(metadata['Summary'])}", 'readme = "README.md"',
             f"requires-python = {q(metadata['Requires-Python'])}", "dependencies = ["]
    lines += [f"    {q(d)}," for d in deps] + ["]", "", "[project.optional-dependencies]"]
    lines += [f"{name} = [{', '.join(q(x) for x in reqs)}]" for name, reqs in extras.items()]
    lines += ["", "[build-system]", 'requires = ["hatchling"]',
              'build-backend = "hatchling.build"', "", "[tool.hatch.build.targets.wheel]",
              'packages = ["src/agentdojo"]', ""]
    return "\n".join(lines)


FORK_ATTACKS_PY = '''\
"""The fork's own attacks, as stand-ins in agentprov's fixture fork: each is AgentDojo's
``direct`` attack under the fork's name (the fork's own code is not public)."""

from agentdojo.attacks.attack_registry import register_attack
from agentdojo.attacks.baseline_attacks import DirectAttack

''' + "".join(f'''
@register_attack
class {cls}(DirectAttack):
    name = "{name}"

''' for name, cls in FORK_ATTACKS.items())


def tree_of(wheel: Path, cache: bytes | None = None) -> dict[str, bytes]:
    """The fixture fork's files, from agentdojo's unpacked wheel ``wheel``."""
    info = wheel / f"agentdojo-{VERSION}.dist-info"
    metadata = email.message_from_bytes((info / "METADATA").read_bytes())
    files = {}
    for p in sorted((wheel / "agentdojo").rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            files[f"src/{p.relative_to(wheel).as_posix()}"] = p.read_bytes()
    init = "src/agentdojo/attacks/__init__.py"
    files[init] = (b"import agentdojo.attacks.fork_fixture_attacks  # noqa: F401  -- the "
                   b"fork's attacks (a fixture)\n" + files[init])
    files["src/agentdojo/attacks/fork_fixture_attacks.py"] = FORK_ATTACKS_PY.encode()
    files[CACHE_PATH] = cache_bytes() if cache is None else cache
    files["pyproject.toml"] = pyproject_of(metadata).encode()
    files["LICENSE"] = (info / "licenses" / "LICENSE").read_bytes()
    files["README.md"] = metadata.get_payload(decode=True)
    return files


def make_fork(root: Path, wheel: Path, *, pyproject: bytes | None = None) -> str:
    """The fixture fork at the new directory ``root`` (one commit); its full commit id.
    ``pyproject`` replaces its ``pyproject.toml`` (a fork that declares something else)."""
    files = tree_of(wheel)
    if pyproject is not None:
        files["pyproject.toml"] = pyproject
    return make_repo(root, files)


def write_tree(dest: Path, wheel: Path) -> None:
    """The fixture fork's files, written below ``dest`` (what ``uv lock`` of
    ``backends/autodojo`` resolves when no copy of the fork is at hand)."""
    for name, data in tree_of(wheel).items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_bytes(data)
