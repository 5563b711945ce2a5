"""A real Temporal dev server for tests, set up one way: the suite's shared one (tests/conftest.py)
and any test module that needs a server of its own."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from hitl.devserver import SERVER_FLAGS, temporal_binary
from hitl.settings import DATA_CONVERTER
from tests.support.bounded_waits import BoundedWaits
from tests.support.patient_updates import PatientUpdates


async def dev_environment() -> WorkflowEnvironment:
    return await WorkflowEnvironment.start_local(
        data_converter=DATA_CONVERTER, interceptors=[PatientUpdates(), BoundedWaits()],
        dev_server_existing_path=temporal_binary(),
        dev_server_extra_args=SERVER_FLAGS,
    )
