"""The worker: `python worker.py` polls the task queue until SIGINT/SIGTERM.

A thin entry point kept where the users asked for it; the worker itself is
`hitl.worker` (build_worker, WorkerTuning, the sandbox's passthrough list).
"""

from hitl.worker import command_line

if __name__ == "__main__":
    command_line()
