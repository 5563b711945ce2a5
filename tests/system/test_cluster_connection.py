"""Any Temporal cluster: TLS, an API key and profiles, read the way Temporal's
own tools read them (temporalio.envconfig), by the worker and the client alike."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.support.worker_processes import start_worker
from tests.support.worker_processes import until_polling
from tests.support.sessions import eventually
from tests.support.stack import run_starter
from tests.support.tls_proxy import Certificates, TlsTerminatingProxy, make_certificates



API_KEY = "hitl-test-api-key-6d1f"


@pytest.fixture
async def secured(env: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[tuple[TlsTerminatingProxy, int, Certificates]]:
    """The test dev server behind TLS, with a certificate from a CA only this test trusts."""
    certificates = make_certificates(tmp_path)
    proxy = TlsTerminatingProxy(env.client.service_client.config.target_host, certificates)
    port = await proxy.start()
    yield proxy, port, certificates
    await proxy.stop()


async def test_worker_and_client_reach_a_tls_cluster_with_an_api_key_from_env_and_profile(
    env: WorkflowEnvironment, secured: tuple[TlsTerminatingProxy, int, Certificates], tmp_path: Path
) -> None:
    proxy, port, certificates = secured
    task_queue = f"tls-{uuid.uuid4().hex[:8]}"
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("remember the milk\n")

    # The worker: TEMPORAL_* environment variables.
    worker = start_worker(f"localhost:{port}", task_queue, workspace, tmp_path / "worker.log", {
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(certificates.ca), "TEMPORAL_API_KEY": API_KEY,
        "HITL_WORKER_IDENTITY": f"tls-worker-{task_queue}",
    })
    try:
        await until_polling(env.client, task_queue, f"tls-worker-{task_queue}")
        assert "(TLS, API key)" in (tmp_path / "worker.log").read_text()

        # The client: a profile of a TOML configuration file.
        config = tmp_path / "temporal.toml"
        config.write_text(
            f'[profile.secure]\naddress = "localhost:{port}"\nnamespace = "default"\napi_key = "{API_KEY}"\n'
            f'[profile.secure.tls]\nserver_ca_cert_path = "{certificates.ca}"\n'
        )
        profile = {"TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "secure", "HITL_TASK_QUEUE": task_queue}
        started = await run_starter("start", "please delete notes.txt", "--session", task_queue, **profile)
        assert started.returncode == 0, started.stderr
        await eventually(lambda: run_starter("--json", "pending", task_queue, **profile),
                         lambda ran: ran.returncode == 0 and json.loads(ran.stdout))
        approved = await run_starter("approve", task_queue, "--by", "ana", **profile)
        assert approved.returncode == 0, approved.stderr
        status = await eventually(lambda: run_starter("--json", "status", task_queue, **profile),
                                  lambda ran: ran.returncode == 0 and json.loads(ran.stdout)["state"] == "idle")
        assert "notes.txt" in json.loads(status.stdout)["last_answer"]
        assert not (workspace / "notes.txt").exists()

        # Without the CA, the same profile is refused: the certificate is really checked.
        untrusting = tmp_path / "untrusting.toml"
        untrusting.write_text(config.read_text().replace(f'server_ca_cert_path = "{certificates.ca}"', ""))
        refused = await run_starter("status", task_queue, **{**profile, "TEMPORAL_CONFIG_FILE": str(untrusting)})
        assert refused.returncode == 1 and "cannot reach Temporal" in refused.stderr
    finally:
        worker.terminate()
        worker.wait()

    # Every request that reached the server through TLS carried the API key.
    requests = [request for connection in proxy.connections for request in connection.requests]
    grpc_calls = [request for request in requests if request.get(":path", "").startswith("/temporal.api.")]
    assert len(proxy.connections) >= 4, "worker, and one connection per starter.py command"
    assert grpc_calls and all(request.get("authorization") == f"Bearer {API_KEY}" for request in grpc_calls)
    assert any(request[":path"].endswith("/PollWorkflowTaskQueue") for request in grpc_calls)
    assert any(request[":path"].endswith("/StartWorkflowExecution") for request in grpc_calls)
