"""Connection and model settings, read from the environment by worker and client alike."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

DEFAULT_MODEL = "gpt-4o-mini"

# One data converter for worker, client and tests: pydantic models in, JSON on the wire.
DATA_CONVERTER = pydantic_data_converter


@dataclass(frozen=True)
class Settings:
    address: str
    namespace: str
    task_queue: str
    workspace: Path
    model: str
    openai_base_url: str | None
    uses_openai: bool
    notify_url: str | None

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            address=os.environ.get("TEMPORAL_ADDRESS", "localhost:7233"),
            namespace=os.environ.get("TEMPORAL_NAMESPACE", "default"),
            task_queue=os.environ.get("HITL_TASK_QUEUE", "hitl-agent"),
            workspace=Path(os.environ.get("HITL_WORKSPACE", "./workspace")),
            model=os.environ.get("HITL_MODEL") or DEFAULT_MODEL,
            openai_base_url=os.environ.get("OPENAI_BASE_URL") or None,
            # The key itself stays here in the environment, read by the model activity alone.
            uses_openai=bool(os.environ.get("OPENAI_API_KEY")),
            notify_url=os.environ.get("HITL_NOTIFY_URL") or None,
        )


async def connect(settings: Settings) -> Client:
    return await Client.connect(
        settings.address, namespace=settings.namespace, data_converter=DATA_CONVERTER
    )
