"""The README's tours, taken one after the other in one workspace, as a newcomer does: the demo, then
the guided path, then the web inbox's curl lines. Each test in tests/system/test_readme_commands.py
and tests/integration/test_api_readme.py runs one tour on a freshly seeded workspace, so none of
them sees a tour delete the file a later one asks about; this walks the printed order itself.

A deletion is followed from what the offline model reads in the message (the call a card shows)
to what the decision deletes (the model's path, or the edited one).
"""

from __future__ import annotations

import json
import re
import shlex

from activities.offline_model import parse_delete
from hitl.console.demo import SAMPLE_DOCUMENTS
from tests.system.test_readme_commands import API_SECTION, DEMO_SECTION, GUIDED_SECTION, bash_blocks, command_lines, section


def demo_decisions() -> list[tuple[str, str, str, dict]]:
    """(session, verb, message or '', edited args) of the chat the demo section prints."""
    steps: list[tuple[str, str, str, dict]] = []
    for line in re.findall(r"```text\n(.*?)```", section(DEMO_SECTION), re.S)[0].splitlines():
        if line.startswith("You: "):
            steps.append(("demo", "start", line[len("You: "):], {}))
        elif line.startswith("> ") and line[2:].strip() in ("a", "approve", "r", "reject"):
            steps.append(("demo", "approve" if line[2:].strip().startswith("a") else "reject", "", {}))
    return steps


def guided_decisions() -> list[tuple[str, str, str, dict]]:
    steps = []
    for command in (c for block in bash_blocks(section(GUIDED_SECTION)) for c in command_lines(block)):
        argv = shlex.split(command, comments=True)
        if argv[:2] != ["python", "starter.py"] or argv[2] not in ("start", "approve", "reject"):
            continue
        if argv[2] == "start":
            steps.append((argv[argv.index("--session") + 1], "start", argv[3], {}))
        else:
            edited = json.loads(argv[argv.index("--args") + 1]) if "--args" in argv else {}
            steps.append((argv[3], argv[2], "", edited))
    return steps


def web_decisions() -> list[tuple[str, str, str, dict]]:
    steps = []
    for command in (c for block in bash_blocks(section(API_SECTION)) for c in command_lines(block)):
        argv = shlex.split(command)
        if argv[0] != "curl" or "-d" not in argv:
            continue
        body = json.loads(argv[argv.index("-d") + 1])
        url = next(arg for arg in argv if arg.startswith("http"))
        if url.endswith("/sessions"):
            steps.append((body["session_id"], "start", body["message"], {}))
        elif match := re.search(r"/sessions/([^/]+)/calls/[^/]+/(approve|reject)$", url):
            steps.append((match[1], match[2], "", body.get("args") or {}))
    return steps


def test_each_tour_finds_the_files_it_names_when_the_tours_run_in_the_printed_order() -> None:
    workspace = set(SAMPLE_DOCUMENTS)  # as the demo seeds it
    asked: dict[str, str] = {}
    problems = []
    for session, verb, message, edited in [*demo_decisions(), *guided_decisions(), *web_decisions()]:
        if verb == "start":
            call = parse_delete(message) if "delete" in message else None
            if call is not None:
                asked[session] = call["path"]
                if call["path"] not in workspace:
                    problems.append(f"{session} asks to delete {call['path']}, which an earlier tour deleted")
            continue
        path = edited.get("path", asked.pop(session, None))
        if verb == "approve" and path is not None:
            if path not in workspace:
                problems.append(f"{session}'s approval deletes {path}, which an earlier tour deleted")
            workspace.discard(path)
    deciding = {session for session, verb, _, _ in [*demo_decisions(), *guided_decisions(), *web_decisions()] if verb != "start"}
    assert {"demo", "tour-1", "tour-2", "web-1"} <= deciding, f"the tours this test follows are no longer printed: {deciding}"
    assert not problems, problems
