"""A fixture of the AgentHarm dataset, for tests and the demo: benign prompts only, in the
real file layout and naming, with real tool names and real ``grade_*`` functions of
inspect_evals 0.20.0's agentharm, and the real counts (test_public 176 = 44 behaviours x 4,
validation 32 = 8 x 4, for the harmful, benign and chat files alike).

It is marked as a fixture in its own files: ``AGENTPROV_FIXTURE.json`` at its root and the
key ``agentprov_fixture`` in every file. ``agentprov backends build agentharm --dataset DIR``
records the mark in the marker and the environment's identity (``dataset.kind:
"fixture"``), so nothing built from it passes as AgentHarm. Scores on it mean nothing.

Write one with::

    python -m agentprov_core.testing.agentharm_fixture DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agentprov_core.backend.datasets import FIXTURE_FILE, FIXTURE_FORMAT, FIXTURE_KEY

#: tool modules present in both benchmark/benign_tools and benchmark/harmful_tools
TOOLS = (("query_google_search", "get_webpage"), ("search_hotels", "send_email"),
         ("get_contacts", "send_message"), ("read_file", "post_to_blog"),
         ("download_image", "share_on_pinterest"), ("get_latest_emails", "edit_txt"))
#: grading functions defined in both benign_ and harmful_grading_functions
GRADERS = ("grade_setup_meeting_location", "grade_sell_spiderman_poster",
           "grade_pinterest_memes", "grade_upload_edited_abstract")
TOPICS = ("a picnic in the park", "a book club meeting", "a bake sale", "a garden tour",
          "a chess evening", "a choir rehearsal", "a museum visit", "a beach clean-up")
CATEGORIES = ("Planning", "Correspondence", "Research", "Sharing")
#: (file, behaviours): each behaviour has four variants (detailed x hint)
FILES = {
    "benchmark/harmful_behaviors_test_public.json": 44,
    "benchmark/harmful_behaviors_validation.json": 8,
    "benchmark/benign_behaviors_test_public.json": 44,
    "benchmark/benign_behaviors_validation.json": 8,
    "benchmark/chat_public_test.json": 44,
    "benchmark/chat_validation.json": 8,
}
NOTE = ("agentprov's FIXTURE of the AgentHarm dataset: benign prompts in the real layout, "
        "for tests and the demo; not the AgentHarm dataset, and no result on it means anything")


def behaviours(first_id: int, count: int, chat: bool) -> list[dict]:
    out = []
    for n in range(count):
        base = first_id + n
        tools = TOOLS[n % len(TOOLS)]
        topic = TOPICS[n % len(TOPICS)]
        for variant, (detailed, hint) in enumerate(
                ((True, True), (True, False), (False, True), (False, False)), start=1):
            prompt = (f"Find a good time for {topic} next week and tell the group about it."
                      if not detailed else
                      f"Look up the opening hours for {topic} next Saturday, then write a "
                      "short friendly note to the group with the time and place.")
            if hint:
                prompt += f" Hint: you must call `{tools[0]}` first and then `{tools[1]}`."
            rec = {"id": f"{base}-{variant}", "id_original": str(base),
                   "detailed_prompt": detailed, "hint_included": hint,
                   "name": f"Fixture {topic} - {variant}",
                   "category": CATEGORIES[n % len(CATEGORIES)], "prompt": prompt}
            if not chat:
                rec |= {"target_functions": list(tools),
                        "grading_function": GRADERS[n % len(GRADERS)]}
            out.append(rec)
    return out


def write(directory: Path) -> list[Path]:
    """Write the fixture into ``directory``; return the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    first = 1
    for rel, count in FILES.items():
        doc = {FIXTURE_KEY: {"format": FIXTURE_FORMAT, "note": NOTE},
               "behaviors": behaviours(first, count, chat="chat_" in rel)}
        first += count
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        written.append(path)
    mark = directory / FIXTURE_FILE
    mark.write_text(json.dumps({"format": FIXTURE_FORMAT, "dataset": "agentharm",
                                "generator": __name__, "note": NOTE}, indent=1) + "\n",
                    encoding="utf-8")
    return [*written, mark]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(f"usage: python -m {__name__} DIR", file=sys.stderr)
        return 2
    for p in write(Path(args[0])):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
