"""Leave the process without interpreter teardown, keeping the exit code.

The Temporal SDK's Rust core keeps threads that can call into Python while the
interpreter finalizes, which sometimes aborts with "Fatal Python error:
PyGILState_Release", or a segmentation fault, after all work is done
(temporalio/sdk-python#300). Once our own shutdown has finished, there is
nothing left for teardown to do.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Callable, NoReturn


def exit_now(code: int) -> NoReturn:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def exit_with(run: Callable[[], int | None]) -> NoReturn:
    """Run a command's `run` and leave with the code Python would have left with: `SystemExit`
    (argparse's usage errors, a refusal to start) included, which would otherwise leave
    through the very teardown `exit_now` avoids."""
    try:
        code: object = run()
    except SystemExit as leaving:
        code = leaving.code
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # noqa: BLE001  (printed as Python would, then the same exit code)
        traceback.print_exc()
        code = 1
    if code is None:
        exit_now(0)
    if isinstance(code, int):
        exit_now(code)
    print(code, file=sys.stderr)
    exit_now(1)
