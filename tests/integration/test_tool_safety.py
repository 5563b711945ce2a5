"""The built-in tools stay inside the workspace and away from the product's own files.

Links inside the workspace are never followed out of it, a folder swapped for
a link mid-call changes nothing, no approval (however the person edits the
arguments) reaches bookings, receipts or notifications, and what the product
writes is private to its user.
"""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowHandle

import hitl.console.demo
from activities.notify import NotifyActivities
from activities.tools import CATALOG, ToolContext, ToolError
from activities.tools.bookings import book_once
from activities.tools.receipts import write_receipt
from hitl.devserver import free_port
from hitl.settings import Settings
from tests.support.sessions import Agent, eventually, query, settled
from tests.support.fake_openai import FakeOpenAI, text, tool_calls
from workflows.requests import Notification


def run(tool: str, workspace: Path, call_id: str = "c1", **args: Any) -> str:
    """A built-in tool called as the tool activity calls it."""
    spec = CATALOG.get(tool)
    assert spec is not None and spec.function is not None
    return spec.function(**args, context=ToolContext(session_id="s1", call_id=call_id, workspace=workspace))


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the workspace that no tool may read or change."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("the zebra password is hunter2\n")
    (folder / "precious.txt").write_text("keep me\n")
    return folder


@pytest.fixture
def usual_umask():
    """The common 022 umask, under which files are world-readable unless created otherwise."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


async def settle_reviews(session: WorkflowHandle[Any, Any]) -> dict[str, Any]:
    """Wait for the turn to end, passing on any review a draft asks for."""
    while True:
        status = await eventually(lambda: query(session, "status"), lambda s: s["state"] in ("idle", "awaiting_human"))
        if status["state"] == "idle":
            return await settled(session)
        for item in await query(session, "pending"):
            await session.signal("approve", {"call_id": item["call_id"], "by": "ana"})
        await asyncio.sleep(0.2)


def tool_results(fake: FakeOpenAI) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in fake.requests[-1]["messages"] if m["role"] == "tool"}


async def test_links_in_the_workspace_never_lead_a_tool_outside(openai_agent: tuple[Agent, FakeOpenAI], outside: Path) -> None:
    agent, fake = openai_agent
    (outside / "documents").mkdir()
    (outside / "documents" / "zebra.md").write_text("zebra facts from outside\n")
    (outside / "mail").mkdir()
    (outside / "drafts").mkdir()
    (agent.workspace / "leak.txt").symlink_to(outside / "secret.txt")
    (agent.workspace / "documents").symlink_to(outside / "documents")
    (agent.workspace / "outbox").symlink_to(outside / "mail")
    (agent.workspace / "drafts").symlink_to(outside / "drafts")
    (agent.workspace / "shortcut.txt").symlink_to(outside / "precious.txt")
    (agent.workspace / "zoo.txt").write_text("a zebra lives in the workspace\n")
    email = {"to": "bob@example.com", "subject": "hi", "body": "hello"}
    fake.script(
        tool_calls(
            ("s", "search_web", {"query": "zebra"}),
            ("e", "send_email", email),
            ("r", "draft_email", email),
            ("d", "delete_file", {"path": "shortcut.txt"}),
        ),
        text("done"),
    )
    session = await agent.start("look around", auto_approve=["*"])

    await settle_reviews(session)
    results = tool_results(fake)
    assert "zoo.txt" in results["s"] and "hunter2" not in results["s"] and "outside" not in results["s"], results["s"]
    assert results["e"].startswith("Error: send_email failed:") and "link" in results["e"], results["e"]
    assert results["r"].startswith("Error: draft_email failed:") and "link" in results["r"], results["r"]
    assert list((outside / "mail").iterdir()) == [] and list((outside / "drafts").iterdir()) == []
    assert not os.path.lexists(agent.workspace / "shortcut.txt"), "the link itself is what a delete removes"
    assert (outside / "precious.txt").read_text() == "keep me\n"


async def test_an_edited_approval_cannot_touch_the_products_own_files(openai_agent: tuple[Agent, FakeOpenAI]) -> None:
    agent, fake = openai_agent
    workspace = agent.workspace
    book_once(workspace, "earlier", "call", "Paris", "Rome", "2026-12-24")
    write_receipt(workspace, "earlier", "call", "delete_file", "old.txt")
    os.link(workspace / "bookings.sqlite", workspace / "innocent.txt")
    edits = {
        "a": "bookings.sqlite",
        "b": ".hitl/receipts.sqlite",
        "c": "notifications.jsonl",
        "d": "./.hitl/./receipts.sqlite",
        "e": "innocent.txt",  # a hard link: the same file by another name
        "f": ".hitl",
    }
    fake.script(tool_calls(*((call_id, "delete_file", {"path": "notes.txt"}) for call_id in edits)), text("done"))
    session = await agent.start("delete notes.txt, six times")

    await eventually(lambda: query(session, "pending"), lambda items: len(items) == len(edits))
    await eventually(lambda: asyncio.sleep(0, (workspace / "notifications.jsonl").exists()), bool)
    for call_id, path in edits.items():
        await session.signal("approve", {"call_id": call_id, "by": "ana", "args": {"path": path}})

    await settled(session)
    results = tool_results(fake)
    for call_id, path in edits.items():
        assert results[call_id].startswith("A person"), results[call_id]
        assert "Error: delete_file failed:" in results[call_id] and "product's own state" in results[call_id], (path, results[call_id])
    for own in ["bookings.sqlite", ".hitl/receipts.sqlite", "notifications.jsonl", "innocent.txt", "notes.txt"]:
        assert (workspace / own).is_file(), own


def test_a_folder_swapped_for_a_link_mid_delete_never_deletes_outside(tmp_path: Path, outside: Path) -> None:
    """The check-then-use race: a folder becomes a link to an outside folder and back, in a tight loop."""
    workspace = tmp_path / "workspace"
    box, parked = workspace / "box", workspace / "box.parked"
    box.mkdir(parents=True)
    pause, paused, resume, stop = threading.Event(), threading.Event(), threading.Event(), threading.Event()

    def swap_folder_for_link() -> None:
        while not stop.is_set():
            if pause.is_set():  # between two whole swaps: `box` is the real folder
                paused.set()
                resume.wait()
                continue
            os.rename(box, parked)
            os.symlink(outside, box)
            os.unlink(box)
            os.rename(parked, box)

    def hold_still() -> None:
        resume.clear()
        paused.clear()
        pause.set()
        assert paused.wait(5), "the swapping thread died"

    def swap_again() -> None:
        pause.clear()
        resume.set()

    swapper = threading.Thread(target=swap_folder_for_link, daemon=True)
    pause.set()
    swapper.start()
    assert paused.wait(5)
    deleted_outside = deleted_inside = 0
    try:
        for attempt in range(40):
            (outside / "victim.txt").write_text("outside")
            (box / "victim.txt").write_text("inside")
            swap_again()
            try:
                run("delete_file", workspace, call_id=f"c{attempt}", path="box/victim.txt")
            except (ToolError, OSError):
                pass  # refused (`box` was a link when the walk reached it), or a failure the activity would retry
            hold_still()
            deleted_outside += not (outside / "victim.txt").exists()
            deleted_inside += not (box / "victim.txt").exists()
    finally:
        stop.set()
        resume.set()
        swapper.join(5)
    assert deleted_outside == 0, f"deleted the file outside in {deleted_outside} of 40 tries"
    assert deleted_inside > 0, "the race never let a delete through; the test proved nothing"


def test_what_the_product_writes_is_private(tmp_path: Path, usual_umask: None) -> None:
    workspace = tmp_path / "workspace"
    email = {"to": "bob@example.com", "subject": "hi", "body": "hello"}
    run("send_email", workspace, call_id="e1", **email)
    run("draft_email", workspace, call_id="d1", **email)
    run("book_flight", workspace, call_id="b1", origin="Paris", destination="Rome", date="2026-12-24")
    (workspace / "notes.txt").write_text("x")
    run("delete_file", workspace, call_id="x1", path="notes.txt")
    notification = Notification(session_id="s1", event="requested", item={}, to=[], at=datetime.now(timezone.utc))
    asyncio.run(NotifyActivities(workspace).notify(notification))

    for folder in ["outbox", "drafts", ".hitl"]:
        assert mode(workspace / folder) == 0o700, folder
    for file in ["outbox/s1--e1.eml", "drafts/s1--d1.eml", "bookings.sqlite", ".hitl/receipts.sqlite", "notifications.jsonl"]:
        assert mode(workspace / file) == 0o600, file


def test_delete_refuses_folders_and_removes_a_link_not_its_target(tmp_path: Path, outside: Path) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "folder").mkdir(parents=True)
    (workspace / "to-outside").symlink_to(outside)
    with pytest.raises(ToolError, match="not a file"):
        run("delete_file", workspace, path="folder")
    assert run("delete_file", workspace, call_id="c2", path="to-outside").startswith("Deleted the link")
    assert not os.path.lexists(workspace / "to-outside") and (outside / "precious.txt").exists()
    (workspace / "through").symlink_to(outside)
    with pytest.raises(ToolError, match="link"):
        run("delete_file", workspace, call_id="c3", path="through/precious.txt")
    assert (outside / "precious.txt").exists()


def test_search_never_reads_the_products_files_by_another_name(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    notification = Notification(session_id="s1", event="requested", item={"args": {"body": "zebra secret"}}, to=[],
                                 at=datetime.now(timezone.utc))
    asyncio.run(NotifyActivities(workspace).notify(notification))
    os.link(workspace / "notifications.jsonl", workspace / "notes.txt")
    assert "secret" not in run("search_web", workspace, query="zebra")


def test_the_products_databases_are_never_opened_through_a_link(tmp_path: Path, outside: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "bookings.sqlite").symlink_to(outside / "stolen.sqlite")
    with pytest.raises(ToolError, match="link"):
        run("book_flight", workspace, origin="Paris", destination="Rome", date="2026-12-24")
    assert not (outside / "stolen.sqlite").exists()

    (workspace / ".hitl").symlink_to(outside)
    (workspace / "notes.txt").write_text("x")
    with pytest.raises(ToolError, match="link"):
        run("delete_file", workspace, path="notes.txt")
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt", "secret.txt"]
    assert (workspace / "notes.txt").exists(), "no receipt, no delete"


def test_an_email_is_never_written_through_a_link_in_the_outbox(tmp_path: Path, outside: Path) -> None:
    outbox = tmp_path / "workspace" / "outbox"
    outbox.mkdir(parents=True)
    for name in ["s1--c1.eml", "s1--c1.partial", "s1--c1.eml.partial"]:
        (outbox / name).symlink_to(outside / "precious.txt")
    run("send_email", tmp_path / "workspace", to="bob@example.com", subject="hi", body="hello")
    assert (outside / "precious.txt").read_text() == "keep me\n"
    sent = outbox / "s1--c1.eml"
    assert sent.is_file() and not sent.is_symlink() and "hello" in sent.read_text()


def test_notifications_are_never_written_through_a_link(tmp_path: Path, outside: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "notifications.jsonl").symlink_to(outside / "precious.txt")
    notification = Notification(session_id="s1", event="requested", item={}, to=[], at=datetime.now(timezone.utc))
    with pytest.raises(Exception, match="link"):
        asyncio.run(NotifyActivities(workspace).notify(notification))
    assert (outside / "precious.txt").read_text() == "keep me\n"


async def test_the_demo_keeps_its_files_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, usual_umask: None) -> None:
    """The dev server's database and log, and the seeded workspace, are the user's alone."""

    class NoChat:
        def __init__(self, *args: Any, **options: Any) -> None:
            pass

        async def run(self) -> int:
            return 0

    monkeypatch.setattr(hitl.console.demo, "Chat", NoChat)
    monkeypatch.setenv("HITL_UI_PORT", str(free_port()))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    settings = Settings(address=f"127.0.0.1:{free_port()}", namespace="default", task_queue="demo", workspace=Path("workspace"),
                        model="offline", openai_base_url=None, uses_openai=False, notify_url=None)

    assert await hitl.console.demo.run_demo(settings, "s1", "ana") == 0
    assert mode(tmp_path / ".hitl") == 0o700
    created = [p for p in (tmp_path / ".hitl").iterdir()]
    assert {p.name for p in created} >= {"temporal.db", "temporal.log"}
    assert all(mode(p) == 0o600 for p in created), {p.name: oct(mode(p)) for p in created}
    assert all(mode(p) == 0o600 for p in (tmp_path / "workspace").iterdir())
    assert os.umask(0o022) == 0o022, "the demo gives the process its umask back"
