"""Workers that start together on one fresh workspace agree on its identity.

`docker compose up --scale worker=3` starts its workers at the same moment. Each
looks for .hitl/workspace-id, finds none and makes one; if each kept its own,
they named different workspaces, and the last to poll refused to join the
others ("served by ..., whose HITL_WORKSPACE is another"): a worker that never
polled (tests/system/test_scale_out.py failed this way in CI).
"""

from __future__ import annotations

import threading
from pathlib import Path

from activities.workspace_identity import workspace_id

STARTERS = 12


def ids_when_started_together(workspace: Path) -> set[str]:
    gate = threading.Barrier(STARTERS)
    found: list[str] = []

    def start() -> None:
        gate.wait()
        found.append(workspace_id(workspace))

    threads = [threading.Thread(target=start) for _ in range(STARTERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(found) == STARTERS, "a starter failed instead of reading the identity"
    return set(found)


def test_workers_started_together_on_a_fresh_workspace_name_one_identity(tmp_path: Path) -> None:
    for round_ in range(10):
        workspace = tmp_path / f"workspace-{round_}"
        workspace.mkdir()
        ids = ids_when_started_together(workspace)
        assert len(ids) == 1, f"round {round_}: {len(ids)} identities for one workspace: {sorted(ids)}"
        assert ids == {workspace_id(workspace)}, "a later start reads the same identity"


def test_the_identity_file_is_private_and_alone(tmp_path: Path) -> None:
    ids_when_started_together(tmp_path)
    state = tmp_path / ".hitl"
    assert sorted(p.name for p in state.iterdir()) == ["workspace-id"], "no partial file is left behind"
    assert (state / "workspace-id").stat().st_mode & 0o777 == 0o600
