"""What is wrong at start, said in one line each, before it surprises anyone later.

Each check reads the environment (or the machine) and returns the line to print, or None.
"""

from __future__ import annotations

import errno
import logging
import os
import socket

from temporalio.exceptions import ApplicationError


def model_warning(environ: os._Environ[str] | dict[str, str] = os.environ) -> str | None:
    """An endpoint named without a key: the offline model would be used without a word."""
    if environ.get("HITL_MODEL", "").startswith("scripted:"):
        return None  # a script plays the model: no endpoint is used, with a key or without
    if environ.get("OPENAI_BASE_URL") and not environ.get("OPENAI_API_KEY"):
        return (f"warning: OPENAI_BASE_URL is set ({environ['OPENAI_BASE_URL']}) but OPENAI_API_KEY is not, so the "
                "built-in offline model is used; set OPENAI_API_KEY (any non-empty value for a local server "
                "without keys) to use the endpoint")
    return None


def tokens_warning(environ: os._Environ[str] | dict[str, str] = os.environ) -> str | None:
    if not environ.get("HITL_API_TOKENS"):
        return ("warning: HITL_API_TOKENS is not set, so nobody can sign in: every route but /, /healthz and "
                "/codec answers 401; name a JSON file {\"<token>\": \"<person>\"} (README, \"People anywhere\")")
    return None


def api_address(host: str | None, port: int | None,
                environ: os._Environ[str] | dict[str, str] = os.environ) -> tuple[str, int]:
    """Where `serve` listens: --host/--port, else HITL_API_HOST/HITL_API_PORT, else 127.0.0.1:8000."""
    return host or environ.get("HITL_API_HOST", "127.0.0.1"), port or int(environ.get("HITL_API_PORT", "8000"))


def port_problem(host: str, port: int) -> str | None:
    """The API's port taken by another program: say so before uvicorn logs a traceback about it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                return None  # uvicorn reports anything else itself
            return (f"error: {host}:{port} is already in use (another `starter.py serve`?); "
                    "choose another port with HITL_API_PORT or --port")
    return None


class OneLinePerFailingCall(logging.Filter):
    """The SDK logs every failed attempt of an activity with its traceback: a model endpoint that
    cannot be reached filled a worker's log with a dozen tracebacks a minute. A failure our own
    activities raised on purpose (an ApplicationError, already a sentence) becomes one line when a
    call first fails and one when it gives up; the retries between them are the spinner's
    ("retrying (attempt 3)") and `temporal workflow describe`'s to show. Anything else keeps its
    traceback: that is a bug to read."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not isinstance(error, ApplicationError) or not str(record.msg).startswith("Completing activity as failed"):
            return True
        info = getattr(record, "temporal_activity", None) or {}
        attempt = info.get("attempt", 1)
        if not error.non_retryable and attempt != 1:
            return False
        then = "giving up" if error.non_retryable else "Temporal retries it until it answers"
        record.msg = (f"{info.get('activity_type', 'activity')} for session {info.get('workflow_id', '?')} "
                      f"failed (attempt {attempt}): {error.message}; {then}")
        record.args = ()
        record.exc_info = record.exc_text = None
        return True


def quiet_expected_failures() -> None:
    logging.getLogger("temporalio.activity").addFilter(OneLinePerFailingCall())
