"""Connection and model settings, read from the environment by worker and client alike."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.envconfig import ClientConfigProfile

from hitl.encryption import codec_from_setting
from hitl.failure_converter import TolerantFailureConverter, TolerantFailureConverterWithEncodedAttributes
from hitl.payload_converter import SharedPydanticPayloadConverter
from hitl.telemetry import client_interceptors

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"


# pydantic's converter, one instance for the process (hitl/payload_converter.py); failures whose
# details cannot be read are read without them (hitl/failure_converter.py).
PLAIN = dataclasses.replace(pydantic_data_converter, payload_converter_class=SharedPydanticPayloadConverter,
                            failure_converter_class=TolerantFailureConverter)


def data_converter(encryption_key: str | None) -> DataConverter:
    """pydantic models in, JSON on the wire; with a key, AES-GCM around every payload.

    Encrypted, failure messages and stack traces move into the (encrypted)
    encoded attributes too: a tool error can quote what the user typed.
    """
    codec = codec_from_setting(encryption_key)
    if codec is None:
        return PLAIN
    return dataclasses.replace(
        PLAIN,
        payload_codec=codec,
        failure_converter_class=TolerantFailureConverterWithEncodedAttributes,
    )


# One data converter for worker, clients, the API and tests. A malformed
# HITL_ENCRYPTION_KEY stops every process here, at start, with the reason.
DATA_CONVERTER = data_converter(os.environ.get("HITL_ENCRYPTION_KEY"))
ENCRYPTED = DATA_CONVERTER.payload_codec is not None


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
    # Client.connect's arguments as Temporal's environment configuration reads
    # them: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*,
    # TEMPORAL_GRPC_META_*, and a profile of the TOML file (TEMPORAL_PROFILE,
    # TEMPORAL_CONFIG_FILE), environment variables winning over the file.
    connection: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)

    @classmethod
    def from_env(cls) -> Settings:
        connection: dict[str, Any] = dict(ClientConfigProfile.load().to_client_connect_config())
        connection.setdefault("target_host", DEFAULT_ADDRESS)
        connection.setdefault("namespace", DEFAULT_NAMESPACE)
        return cls(
            address=connection["target_host"],
            namespace=connection["namespace"],
            task_queue=os.environ.get("HITL_TASK_QUEUE", "hitl-agent"),
            workspace=Path(os.environ.get("HITL_WORKSPACE", "./workspace")),
            model=os.environ.get("HITL_MODEL") or DEFAULT_MODEL,
            openai_base_url=os.environ.get("OPENAI_BASE_URL") or None,
            # The key itself stays here in the environment, read by the model activity alone.
            uses_openai=bool(os.environ.get("OPENAI_API_KEY")),
            notify_url=os.environ.get("HITL_NOTIFY_URL") or None,
            connection=connection,
        )

    @property
    def secured(self) -> str:
        """How the connection is protected, for start-up lines (never the key itself)."""
        parts = ["TLS" if self.connection.get("tls") else "plaintext"]
        if self.connection.get("api_key"):
            parts.append("API key")
        if ENCRYPTED:
            parts.append("payloads encrypted")
        return ", ".join(parts)


async def connect(settings: Settings) -> Client:
    connection = settings.connection or {"target_host": settings.address, "namespace": settings.namespace}
    # Tracing, when asked for (hitl/telemetry.py): the interceptor also traces a worker built on this client.
    return await Client.connect(**connection, data_converter=DATA_CONVERTER, interceptors=client_interceptors())


# What the SDK's connect error (a Rust transport error, one long line) means, for a person.
CONNECT_PROBLEMS = (("Connection refused", "nothing listens there"), ("dns error", "no such host"),
                    ("timed out", "no answer"), ("Timeout", "no answer"), ("tls", "TLS failed"),
                    ("certificate", "TLS failed"))


def unreachable(settings: Settings, error: BaseException) -> str:
    """One line: which address could not be reached, why in a few words, and what to set."""
    text = str(error)
    why = next((meaning for mark, meaning in CONNECT_PROBLEMS if mark in text), text.splitlines()[0][:200])
    # Not a bare `temporal server start-dev`: it lacks the search attributes the inbox needs.
    return (f"cannot reach Temporal at TEMPORAL_ADDRESS={settings.address} ({why}): start a server there "
            "(`./demo.sh`, or the README's `temporal server start-dev` line, which adds the search attributes), "
            "or set TEMPORAL_ADDRESS to the host:port of yours")
