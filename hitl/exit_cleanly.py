"""Leave the process without interpreter teardown, keeping the exit code.

The Temporal SDK's Rust core keeps threads that can call into Python while the
interpreter finalizes, which sometimes aborts with "Fatal Python error:
PyGILState_Release" after all work is done (temporalio/sdk-python#300). Once
our own shutdown has finished, there is nothing left for teardown to do.
"""

from __future__ import annotations

import os
import sys


def exit_now(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
