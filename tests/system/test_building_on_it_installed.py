"""Building on it as a user does: a fresh virtualenv, the project installed from a `git clone` of
this checkout (its committed state) with the lock's pins from the machine's package index, and a
folder of the user's own holding docs/interface.md's `my_tools.py`, `script.json`, `pytest.ini`
and `test_my_tools.py` exactly as printed. pytest, run there with that venv's interpreter, sees the
refund over 100 pause, approves it through HitlClient and sees the tool's result: no model
server, no Docker, nothing of the checkout on sys.path. The page's `hitl-worker` line, run in
that folder, serves the same script to a session on the suite's server.
"""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.support.docs_example import the_worker_line_serves_the_docs_session, write_users_files
from tests.support.stack import ROOT, product_env

INSTALL_SECONDS = 900  # a bound against a hang: the lock's few hundred wheels, unpacked on a shared machine


def installed(command: list[str], cwd: Path) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=INSTALL_SECONDS)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def users_environment(bin_folder: Path) -> dict[str, str]:
    """What a user's shell would have: the venv's bin first, and none of the test run's Python paths."""
    env = {name: value for name, value in product_env().items()
           if name not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTEST_ADDOPTS")}
    return {**env, "PATH": f"{bin_folder}{os.pathsep}{env.get('PATH', '')}", "VIRTUAL_ENV": str(bin_folder.parent)}


@pytest.fixture(scope="module")
def users_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the project installed from a clone; its interpreter."""
    folder = tmp_path_factory.mktemp("user")
    clone = folder / "hitl-agent"
    installed(["git", "clone", "--quiet", str(ROOT), str(clone)], folder)
    venv.create(folder / "venv", with_pip=True)
    python = folder / "venv" / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    installed([*pip, "--require-hashes", "-r", str(clone / "requirements-test.lock")], folder)
    installed([*pip, "--no-deps", str(clone)], folder)
    return python


def test_the_docs_tool_script_and_test_pass_in_a_fresh_venv_installed_from_a_clone(users_python: Path, tmp_path: Path) -> None:
    project = tmp_path / "my-agent"
    files = write_users_files(project)
    assert set(files) == {"my_tools.py", "pytest.ini", "test_my_tools.py", "script.json"}, sorted(files)
    environment = users_environment(users_python.parent)

    where = subprocess.run([str(users_python), "-c", "import hitl, my_tools; print(hitl.__file__)"], cwd=project,
                           env=environment, capture_output=True, text=True, timeout=120)
    assert where.returncode == 0, where.stderr
    product = Path(where.stdout.strip())
    assert product.is_relative_to(users_python.parent.parent) and not product.is_relative_to(ROOT), product

    ran = subprocess.run(
        [str(users_python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "--rootdir", str(project), "--basetemp", str(tmp_path / "basetemp"), "test_my_tools.py"],
        cwd=project, env=environment, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout[-4000:] + ran.stderr[-2000:]


async def test_the_docs_worker_line_runs_in_the_users_folder_with_the_installed_hitl_worker(
        users_python: Path, env: WorkflowEnvironment, tmp_path: Path) -> None:
    project = tmp_path / "my-agent"
    write_users_files(project)
    environment = users_environment(users_python.parent)
    await the_worker_line_serves_the_docs_session([str(users_python.parent / "hitl-worker")], project, env.client,
                                                  environment)
