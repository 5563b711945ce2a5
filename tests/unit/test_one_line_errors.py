"""What a newcomer gets wrong at start is said in one line, before the worker connects anywhere:
a module name HITL_TOOL_MODULES cannot find, an endpoint named without a key (issue 37, item 5).
Each runs the real `worker.py` or `starter.py` against an address where no server listens."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from tests.support.stack import ROOT, nobody_listens, product_env, run_product, run_starter

TYPO = "worker: HITL_TOOL_MODULES: no module named 'my_tool' (a module name, not a file"


async def test_a_tool_module_that_is_not_there_stops_the_worker_with_one_line() -> None:
    worker = await run_product("worker.py", HITL_TOOL_MODULES="my_tool", TEMPORAL_ADDRESS=nobody_listens())
    assert worker.returncode == 1, worker.stderr
    assert "Traceback" not in worker.stderr, worker.stderr
    [line] = worker.stderr.strip().splitlines()
    assert line.startswith(TYPO), line


async def test_starter_tools_says_the_same_of_a_tool_module_that_is_not_there() -> None:
    listed = await run_starter("tools", HITL_TOOL_MODULES="my_tool")
    assert listed.returncode == 2 and "Traceback" not in listed.stderr, listed.stderr
    [line] = listed.stderr.strip().splitlines()
    assert line.startswith("error: " + TYPO.removeprefix("worker: ")), line


async def test_a_tool_module_that_imports_what_is_not_installed_is_named_with_it(tmp_path: Path) -> None:
    (tmp_path / "needs_more.py").write_text("import a_package_nobody_installed\n")
    worker = await run_product("worker.py", HITL_TOOL_MODULES="needs_more", TEMPORAL_ADDRESS=nobody_listens(),
                               PYTHONPATH=f"{ROOT}:{tmp_path}")
    assert worker.returncode == 1 and "Traceback" not in worker.stderr, worker.stderr
    assert worker.stderr.strip().splitlines() == [
        "worker: HITL_TOOL_MODULES: needs_more imports 'a_package_nobody_installed', which is not installed"]


async def test_an_endpoint_without_a_key_is_said_before_the_worker_connects() -> None:
    """The warning came after connecting: a worker that could not reach Temporal yet never said it."""
    worker = await run_product("worker.py", OPENAI_BASE_URL="http://localhost:11434/v1",
                               TEMPORAL_ADDRESS=nobody_listens(), HITL_CONNECT_PATIENCE_SECONDS="0")
    assert worker.returncode == 1, worker.stderr
    assert ("worker: warning: OPENAI_BASE_URL is set (http://localhost:11434/v1) but OPENAI_API_KEY is not, "
            "so the built-in offline model is used") in worker.stderr, worker.stderr


async def test_a_setting_of_the_sdk_shortcuts_that_is_neither_on_nor_off_stops_the_worker_with_one_line() -> None:
    worker = await run_product("worker.py", HITL_QUERY_BUFFER_RETRY="sometimes", TEMPORAL_ADDRESS=nobody_listens())
    assert worker.returncode == 1 and "Traceback" not in worker.stderr, worker.stderr
    assert worker.stderr.strip().splitlines() == ["worker: HITL_QUERY_BUFFER_RETRY must be on or off, not 'sometimes'"]


MY_TOOL = '''from hitl import tool


@tool(needs_approval=True)
def refund_payment(order_id: str, amount: float) -> str:
    """Refund an order's payment."""
    return f"Refunded {amount:.2f} on order {order_id}."
'''


async def started_in(folder: Path, script: str, *args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    """`python /path/to/<script>` started in the user's own folder, as the docs' worker line is."""
    return await asyncio.to_thread(
        subprocess.run, [sys.executable, str(ROOT / script), *args], cwd=folder, env=product_env(**variables),
        capture_output=True, text=True, timeout=60)


async def test_a_tool_module_in_the_folder_the_worker_starts_in_is_found(tmp_path: Path) -> None:
    (tmp_path / "my_tools.py").write_text(MY_TOOL)
    listed = await started_in(tmp_path, "starter.py", "tools", HITL_TOOL_MODULES="my_tools")
    assert listed.returncode == 0, listed.stderr
    assert any(line.split()[0] == "refund_payment" and line.endswith("user (my_tools)")
               for line in listed.stdout.splitlines()), listed.stdout
    worker = await started_in(tmp_path, "worker.py", HITL_TOOL_MODULES="my_tools", TEMPORAL_ADDRESS=nobody_listens(),
                              HITL_CONNECT_PATIENCE_SECONDS="0")
    assert worker.returncode == 1 and "HITL_TOOL_MODULES" not in worker.stderr, worker.stderr
    assert "cannot reach Temporal" in worker.stderr, worker.stderr
