"""What the card says a decision does: approving in the tool's own words, and the deadline's rule."""

from __future__ import annotations

from hitl.client.consequences import with_consequences

DUE = "2026-12-24T10:00:00Z"


def test_approving_a_built_in_tool_says_what_it_does_to_these_arguments() -> None:
    item = with_consequences({"kind": "approval", "tool": "delete_file", "args": {"path": "notes.txt"}, "deadline": DUE})
    assert item["approving"] == "deletes notes.txt now"
    assert item["at_deadline"] == "the call is cancelled and the agent is told; the tool does not run"
    booking = with_consequences({"kind": "approval", "tool": "book_flight",
                                 "args": {"origin": "Shanghai", "destination": "Beijing", "date": "2026-12-24"}})
    assert booking["approving"] == "books a flight from Shanghai to Beijing on 2026-12-24 now"
    assert "at_deadline" not in booking, "no deadline, nothing happens at it"


def test_a_tool_known_by_no_words_here_runs_with_these_arguments() -> None:
    mcp = with_consequences({"kind": "approval", "tool": "mcp__git__git_add", "args": {"files": ["a"]}, "deadline": DUE})
    assert mcp["approving"] == "runs mcp__git__git_add with these arguments now"
    # An argument the words need is missing (an edit, an older call): said plainly, never a traceback.
    odd = with_consequences({"kind": "approval", "tool": "delete_file", "args": {}})
    assert odd["approving"] == "runs delete_file with these arguments now"


def test_a_question_is_not_approved_and_a_review_withholds_its_result_at_the_deadline() -> None:
    question = with_consequences({"kind": "question", "tool": "ask_user_question", "args": {}, "deadline": DUE})
    assert "approving" not in question
    assert question["at_deadline"] == "the question is cancelled and the agent is told nobody answered"
    review = with_consequences({"kind": "review", "tool": "draft_email", "args": {}, "deadline": DUE})
    assert review["approving"].startswith("the agent reads this result now")
    assert review["at_deadline"].startswith("the result is withheld from the agent")
