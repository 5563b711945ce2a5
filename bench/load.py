"""Many paused sessions on one worker: start rate, worker memory, finding them, resuming them.

    python -m bench.load --sessions 10000

starts its own dev server (file-backed, the demo's settings) and one
`python worker.py` process, then runs the load of tests/support/load.py (which
tests/integration/test_load.py runs with 1,000 sessions) and prints its report.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import asdict

from bench.own_server import own_dev_server
from tests.support.load import run_load
from tests.support.worker_processes import start_worker


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    args = parser.parse_args()
    async with own_dev_server() as (client, address, folder):
        workspace = folder / "workspace"
        worker = start_worker(address, "load", workspace, folder / "worker.log")
        try:
            report = await run_load(client, worker.pid, "load", args.sessions, "load", workspace)
        finally:
            worker.terminate()
            worker.wait()
    print(report.lines())
    print(json.dumps(asdict(report)))


if __name__ == "__main__":
    asyncio.run(main())
    from hitl.exit_cleanly import exit_now

    exit_now(0)
