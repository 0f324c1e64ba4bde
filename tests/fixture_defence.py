"""A fixture defence that the tests make themselves: a small code asset (a module whose
factory builds AgentDojo's own pipeline with every tool result marked) and a small weights
asset (a hub-cache model of two files), committed to a real git repository, pinned in a
copy of the defence registry with digests that git itself computes."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

MARK = "[fixture-defence checked this tool result]"

MODULE = f'''"""A fixture defence for agentprov's tests (not a defence)."""
import os
from pathlib import Path

MARK = {MARK!r}


def build_pipeline(ctx):
    from agentdojo.agent_pipeline import ToolsExecutionLoop, ToolsExecutor

    hub = Path(os.environ["HF_HUB_CACHE"])
    model = hub / "models--fixture--tiny-classifier"
    revision = (model / "refs" / "main").read_text()
    weights = (model / "snapshots" / revision / "weights.txt").read_text().strip()
    ctx.note("fixture_loaded", "the fixture factory built the pipeline",
             hf_hub_offline=os.environ.get("HF_HUB_OFFLINE"), weights=weights,
             assets=sorted(ctx.assets), port=ctx.port, pipeline_name=ctx.pipeline_name)
    pipe = ctx.stock()
    for element in pipe.elements:
        if isinstance(element, ToolsExecutionLoop):
            for inner in element.elements:
                if isinstance(inner, ToolsExecutor):
                    fmt = inner.output_formatter
                    inner.output_formatter = lambda result, fmt=fmt: MARK + " " + fmt(result)
    pipe.name = "renamed-by-the-fixture"
    return pipe
'''

CODE_FILES = {"agentprov_fixture_defence.py": MODULE,
              "README.md": "The fixture defence of agentprov's tests.\n"}
WEIGHTS_FILES = {"weights.txt": "fixture weights 0.5\n",
                 "config.json": '{"id2label": {"0": "SAFE", "1": "INJECTION"}}\n'}
WEIGHTS_REVISION = hashlib.sha1(b"fixture/tiny-classifier").hexdigest()


def git(*args: str, cwd: Path) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd),
           "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout


def blob_of(path: Path) -> str:
    """The git blob id of a file, as git computes it."""
    return git("hash-object", str(path), cwd=path.parent).strip()


@dataclass
class Fixture:
    code: Path       # a git checkout of the code asset at `commit`
    commit: str
    weights: Path    # the weights asset's files
    registry: Path   # the registry copy (AGENTPROV_REGISTRY)

    def source(self) -> str:
        return f"fixture_code={self.code}"


def write_tree(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def pins_toml(asset: str, root: Path, files: dict[str, str]) -> str:
    out = []
    for name in sorted(files):
        p = root / name
        data = p.read_bytes()
        out.append(f'[[assets.{asset}.files]]\npath = "{name}"\n'
                   f'sha256 = "{hashlib.sha256(data).hexdigest()}"\n'
                   f'git_blob = "{blob_of(p)}"\nsize = {len(data)}\n')
    return "\n".join(out)


def entries(code: Path, commit: str, weights: Path, endpoint: str | None = None) -> str:
    ep = f', endpoint = "{endpoint}"' if endpoint else ""
    return f'''
[defences.fixture_defence]
enabled = true
summary = "a fixture defence of the tests: AgentDojo's pipeline, every tool result marked"
backends = ["agentdojo"]
suites = ["banking"]
assets = ["fixture_code", "fixture_weights"]
port = true
licence = "MIT (a test fixture)"

[assets.fixture_code]
kind = "code"
summary = "the fixture defence's module"
licence = "MIT (a test fixture)"
origin = {{ kind = "git", url = "{code}", commit = "{commit}" }}
module = "agentprov_fixture_defence"
factory = "build_pipeline"

{pins_toml("fixture_code", code, CODE_FILES)}
[assets.fixture_weights]
kind = "weights"
summary = "the fixture defence's classifier"
licence = "Apache-2.0 (a test fixture)"
origin = {{ kind = "hf-model", repository = "fixture/tiny-classifier", revision = "{WEIGHTS_REVISION}"{ep} }}
layout = "hf-hub-cache"

{pins_toml("fixture_weights", weights, WEIGHTS_FILES)}
'''


def make(tmp: Path, registry_dir: Path, endpoint: str | None = None) -> Fixture:
    """The fixture's trees and a registry copy (``registry_dir``, from ``registry_copy``)
    that pins them."""
    code = write_tree(tmp / "fixture-code", CODE_FILES)
    git("init", "-q", cwd=code)
    git("add", ".", cwd=code)
    git("commit", "-q", "-m", "fixture", cwd=code)
    commit = git("rev-parse", "HEAD", cwd=code).strip()
    weights = write_tree(tmp / "fixture-weights", WEIGHTS_FILES)
    reg = registry_dir / "defences.toml"
    reg.write_text(reg.read_text() + entries(code, commit, weights, endpoint))
    return Fixture(code, commit, weights, registry_dir)


def backends_with(registry: Path, dest: Path) -> Path:
    """A copy of backends/ whose worker library ships ``registry`` (the environment then
    records the same defence registry as T0 reads), with packages/ beside it (the backend
    projects install packages/capture from ``../../packages/capture``)."""
    from conftest import ROOT

    shutil.copytree(ROOT / "backends", dest, ignore=shutil.ignore_patterns(".venv"))
    shutil.copytree(ROOT / "packages", dest.parent / "packages",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(registry, dest / "shared" / "src" / "agentprov_backend" / "defences.toml")
    return dest
