"""The AgentHarm fixture gives every real grading function what it reads, and every file has a
behaviour that reaches the semantic judge.

The table below is read off inspect_evals 0.20.0's
``inspect_evals/agentharm/benchmark/benign_grading_functions.py`` and
``harmful_grading_functions.py`` (the same function names in both):

- ``grade_setup_meeting_location`` (both modules) indexes ``metadata["target_functions"]``
  at 0, 1 and 2 (``target_functions2 = [tf[1], tf[0], tf[2]]``, the comments name them
  search_hotels, get_client_emails, send_email); with fewer it raises IndexError.
- ``grade_pinterest_memes`` (both) calls ``semantic_judge`` when the last
  ``create_meme_image`` call has ``top_text`` and ``bottom_text``.
- ``grade_upload_edited_abstract``: the harmful one calls ``semantic_judge`` when the last
  ``post_on_x`` call has ``content``; the benign one calls no judge (it reads
  ``upload_file``).
- ``grade_sell_spiderman_poster`` (both) calls no judge.

Every other use of ``target_functions`` in these four is over the whole list
(``is_function_called`` for each, ``is_correct_order``); their only other metadata read is
``metadata["semantic_judge"]``, which the scorer adds. The agent can call only the target
functions (``setup_tools_from_metadata``), so a judge's tool must be one of them.
"""

import json

import pytest

from agentprov_core.testing import agentharm_fixture

#: grading function -> (how many target functions it indexes, the tool whose arguments
#: reach the semantic judge and those arguments, per module; None: no judge)
READS = {
    "grade_setup_meeting_location": (3, {"harmful": None, "benign": None}),
    "grade_sell_spiderman_poster": (0, {"harmful": None, "benign": None}),
    "grade_pinterest_memes": (0, {"harmful": ("create_meme_image", {"top_text", "bottom_text"}),
                                  "benign": ("create_meme_image", {"top_text", "bottom_text"})}),
    "grade_upload_edited_abstract": (0, {"harmful": ("post_on_x", {"content"}),
                                         "benign": None}),
}
#: the order grade_setup_meeting_location's comments give its three target functions
MEETING = ["search_hotels", "get_client_emails", "send_email"]
#: the required parameters of the judges' tools, the same in benchmark/benign_tools and
#: benchmark/harmful_tools (create_meme_image.py: image_path, top_text, bottom_text;
#: post_on_x.py: content, image_path, video_path)
TOOL_PARAMS = {"create_meme_image": {"image_path", "top_text", "bottom_text"},
               "post_on_x": {"content", "image_path", "video_path"}}
#: counts of the real dataset: test_public 44 behaviours x 4, validation 8 x 4
COUNTS = {"test_public": 176, "validation": 32}


@pytest.fixture(scope="module")
def fixture_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("agentharm-fixture")
    agentharm_fixture.write(d)
    return {rel: json.loads((d / rel).read_text()) for rel in agentharm_fixture.FILES}


def _graded(fixture_files):
    for rel, doc in fixture_files.items():
        name = rel.rsplit("/", 1)[-1]
        if not name.startswith("chat_"):
            yield rel, name.split("_", 1)[0], doc["behaviors"]


def test_every_behaviour_gives_its_grader_the_target_functions_it_reads(fixture_files):
    graded = list(_graded(fixture_files))
    assert [kind for _, kind, _ in graded] == ["harmful", "harmful", "benign", "benign"]
    for rel, _, behaviours in graded:
        assert len(behaviours) == COUNTS["validation" if "validation" in rel else "test_public"]
        for b in behaviours:
            indexed, _ = READS[b["grading_function"]]
            assert len(b["target_functions"]) >= indexed, (rel, b["id"])
            assert len(set(b["target_functions"])) == len(b["target_functions"]), b["id"]
            if b["grading_function"] == "grade_setup_meeting_location":
                assert b["target_functions"][:3] == MEETING, (rel, b["id"])
    for rel, doc in fixture_files.items():
        if rel.rsplit("/", 1)[-1].startswith("chat_"):
            assert not any("target_functions" in b or "grading_function" in b
                           for b in doc["behaviors"]), rel


def test_every_graded_file_has_a_behaviour_that_reaches_the_semantic_judge(fixture_files):
    for rel, kind, behaviours in _graded(fixture_files):
        reaching = []
        for b in behaviours:
            judge = READS[b["grading_function"]][1][kind]
            if judge and judge[0] in b["target_functions"]:
                assert judge[1] <= TOOL_PARAMS[judge[0]]  # the agent can pass what it reads
                reaching.append(b["id"])
        assert reaching, rel
        # the first behaviour of each file, which the cells' tests run by index
        assert reaching[0] == behaviours[0]["id"], rel
