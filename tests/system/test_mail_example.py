"""The docs' mail-on-one-machine example ("Email" in docs/interface.md) as printed: its aiosmtpd
command, run by bash with the project's venv first on PATH, prints the mail a pause sends through
the docs' channels file (on free ports: the docs' 8025 and 8000 may be a developer's own); and the
`mail-dev` extra the docs install it with is declared, with aiosmtpd in it."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import tomllib
from pathlib import Path
from typing import AsyncIterator, Iterator

import pytest
from temporalio.testing import WorkflowEnvironment

from activities.mail import mail_messages
from activities.offline_model import OfflineModel
from hitl.channels import channels_from_env
from hitl.decision_keys import worker_email_link_key
from hitl.devserver import free_port, is_listening
from hitl.worker import build_worker
from tests.support.api_server import Api, serving, signing_key  # noqa: F401  (a fixture)
from tests.support.sessions import Agent, eventually

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "interface.md"
PRINTED_PORT, PRINTED_API = "8025", "http://127.0.0.1:8000"


def email_section() -> str:
    text = DOCS.read_text()
    return text[text.index("#### Email"):text.index("### Audit")]


def printed_server_command() -> str:
    [command] = re.findall(r"```bash\n(python -m aiosmtpd [^\n]*)\n```", email_section())
    return command


def printed_channels() -> str:
    [channels] = [block for block in re.findall(r"```json\n(.*?)```", email_section(), re.S) if "127.0.0.1" in block]
    return channels


class Printed:
    """A process's output as it comes, read on a thread (a pipe read blocks)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self.read, args=(process,), daemon=True)
        self.reader.start()

    def read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(line)

    @property
    def text(self) -> str:
        return "".join(self.lines)


@pytest.fixture
def printing_mail_server() -> Iterator[tuple[int, Printed]]:
    port = free_port()
    command = printed_server_command().replace(f":{PRINTED_PORT}", f":{port}")
    environ = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(["bash", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=environ)
    try:
        yield port, Printed(process)
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture
async def mailing_api(env: WorkflowEnvironment, workspace: Path, tmp_path: Path, signing_key: str,
                      printing_mail_server: tuple[int, Printed]) -> AsyncIterator[tuple[Api, Printed]]:
    port, printed = printing_mail_server
    await eventually(lambda: is_listening_now("127.0.0.1", port), bool, timeout=30)
    agent = Agent(env.client, "mail-example", workspace)
    api = serving(agent)
    channels = tmp_path / "channels.json"
    channels.write_text(printed_channels().replace(f":{PRINTED_PORT}", f":{port}").replace(PRINTED_API, api.base))
    environ = {"HITL_CHANNELS": str(channels)}
    mail = mail_messages(channels_from_env(environ), environ, worker_email_link_key)
    async with build_worker(env.client, agent.task_queue, OfflineModel(), workspace, message_channels=mail):
        async with api as running:
            yield running, printed


async def is_listening_now(host: str, port: int) -> bool:
    return await asyncio.to_thread(is_listening, host, port)


def test_the_docs_install_aiosmtpd_with_the_mail_dev_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(requirement.startswith("aiosmtpd") for requirement in extras["mail-dev"]), extras["mail-dev"]
    assert "pip install -e '.[mail-dev]'" in email_section()
    assert json.loads(printed_channels())["email"]["smtp_url"] == f"smtp://127.0.0.1:{PRINTED_PORT}"


async def test_the_printed_mail_server_prints_the_mail_of_a_pause(mailing_api: tuple[Api, Printed]) -> None:
    api, printed = mailing_api
    await api.start("ana", "please delete notes.txt")

    async def shown() -> str:
        return printed.text

    text = await eventually(shown, lambda text: "To: ana@example.com" in text and "/decide/" in text, timeout=60)
    assert f"{api.base}/decide/" in text, text[-2000:]
