"""Every `$ agentprov …` transcript in docs/ is re-run and compared with its recorded output.

Only digests (runs of 8 or more hex digits), times and paths are normalised, so a changed
behaviour fails this test until the docs say so too. A transcript whose output depends on
the machine is written once per machine state, each fence preceded by
``<!-- transcript when: STATE -->`` (:data:`WHEN`: ``bwrap``, a working bubblewrap;
``no-bwrap``, none installed); a transcript runs only where its state holds, and is
skipped, with the reason, elsewhere. To re-record after an intended change:

    AGENTPROV_UPDATE_TRANSCRIPTS=1 pytest tests/test_transcripts.py
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, bwrap_unusable, child_env

DOCS = sorted((ROOT / "docs").rglob("*.md"))
FENCE = re.compile(r"^(?:<!-- transcript when: ([\w-]+) -->\n)?```(\w*)\n(.*?)^```", re.S | re.M)
HEX = re.compile(r"\b[0-9a-f]{8,}\b")
TIME = re.compile(r"\b\d+(\.\d+)?s\b")


BUILT = "<!-- transcripts: built-environment -->"


def _no_bwrap() -> str | None:
    if not sys.platform.startswith("linux"):
        return "bubblewrap is Linux only"
    return None if shutil.which("bwrap") is None else "bubblewrap is installed here"


#: Machine states a transcript may be written for: each gives None where it holds, else why not.
WHEN = {"bwrap": bwrap_unusable, "no-bwrap": _no_bwrap}


@dataclass
class Transcript:
    doc: Path
    index: int
    command: str
    expected: str  # output lines, then "[exit N]" when N != 0
    when: str | None = None  # the machine state it is written for (WHEN)

    @property
    def built(self) -> bool:
        """The doc's transcripts run against the real AgentDojo environment (slow)."""
        return BUILT in self.doc.read_text(encoding="utf-8")


def parse(doc: Path) -> tuple[list[Transcript], dict[str, str]]:
    text = doc.read_text(encoding="utf-8")
    out, files = [], {}
    for m in FENCE.finditer(text):
        when, lang, body = m.group(1), m.group(2), m.group(3)
        assert when is None or when in WHEN, f"{doc}: unknown transcript state {when!r}"
        if lang == "toml" and body.startswith("# ") and body.split("\n", 1)[0].endswith(".toml"):
            files[body.split("\n", 1)[0][2:].strip()] = body
        if lang != "console":
            continue
        lines = body.rstrip("\n").split("\n")
        i = 0
        while i < len(lines):
            if not lines[i].startswith("$ agentprov"):
                i += 1
                continue
            cmd = lines[i][2:]
            while cmd.endswith("\\"):
                i += 1
                cmd = cmd[:-1] + " " + lines[i].strip()
            i += 1
            start = i
            while i < len(lines) and not lines[i].startswith("$ "):
                i += 1
            out.append(Transcript(doc, len(out), cmd, "\n".join(lines[start:i]), when))
    return out, files


def all_transcripts():
    for doc in DOCS:
        ts, _ = parse(doc)
        for t in ts:
            marks = [pytest.mark.slow] if t.built else []
            if t.when is not None and (why := WHEN[t.when]()) is not None:
                marks.append(pytest.mark.skip(reason=f"written for a machine with state "
                                                     f"{t.when!r}: {why}"))
            yield pytest.param(t, id=f"{doc.relative_to(ROOT)}#{t.index}", marks=marks)


def normalise(text: str) -> str:
    return TIME.sub("<t>s", HEX.sub("<hex>", text))


def run(t: Transcript, tmp: Path, home: Path) -> str:
    dirs = {"CORPORA": tmp / "corpora", "SCRIPT": tmp / "script.json", "PLANS": tmp / "plans",
            "AGENTPROV_HOME": home}
    dirs["CORPORA"].mkdir(exist_ok=True)
    dirs["PLANS"].mkdir(exist_ok=True)
    dirs["SCRIPT"].write_bytes((ROOT / "examples" / "scripts" / "live-demo.json").read_bytes())
    _, files = parse(t.doc)
    for name, body in files.items():
        (dirs["PLANS"] / name).write_text(body)
    cmd = t.command
    for k, v in dirs.items():
        cmd = cmd.replace(f"${k}", str(v))
    argv = shlex.split(cmd)
    assert argv[0] == "agentprov"
    env = child_env()
    env |= {"AGENTPROV_HOME": str(home), "PYTHONUNBUFFERED": "1", "COLUMNS": "100"}
    p = subprocess.run([sys.executable, "-m", "agentprov_core", *argv[1:]], cwd=tmp,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                       timeout=300)
    got = p.stdout.rstrip("\n")
    for k, v in sorted(dirs.items(), key=lambda kv: -len(str(kv[1]))):
        got = got.replace(str(v), f"${k}")
    if p.returncode != 0:
        got += f"\n[exit {p.returncode}]"
    return got


_DOC_DIRS: dict[Path, Path] = {}


@pytest.mark.parametrize("t", list(all_transcripts()))
def test_transcript(t: Transcript, tmp_path: Path, request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory):
    home = request.getfixturevalue("agentdojo_env").home if t.built else tmp_path / "home"
    if t.built:  # a built-environment page is one session: later commands see earlier corpora
        tmp_path = _DOC_DIRS.setdefault(t.doc, tmp_path_factory.mktemp("doc"))
    got = run(t, tmp_path, home)
    if os.environ.get("AGENTPROV_UPDATE_TRANSCRIPTS") and normalise(got) != normalise(t.expected):
        text = t.doc.read_text(encoding="utf-8")
        head = "$ " + t.command
        old = head + ("\n" + t.expected if t.expected else "")
        assert text.count(old) >= 1, "cannot locate the transcript to update"
        t.doc.write_text(text.replace(old, head + "\n" + got, 1), encoding="utf-8")
        return
    assert normalise(got) == normalise(t.expected), (
        f"{t.doc.relative_to(ROOT)}: `{t.command}` printed:\n{got}")


def test_the_guide_has_transcripts():
    assert len(list(all_transcripts())) >= 15
