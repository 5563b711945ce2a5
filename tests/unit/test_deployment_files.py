"""docker-compose.yml, .env.example and the Dockerfile agree with what the product reads.

No Docker engine runs here, so these read the files: every service's image,
command, ports, environment, health check and dependencies, checked against
the code (the variables it reads, the API's routes, the search attributes).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from setuptools import find_packages
import yaml

from hitl.api.codec import router as codec_router
from hitl.devserver import SEARCH_ATTRIBUTES
from tests.support.stack import ROOT

# Read by the code but deliberately not set by docker-compose.yml, each with the reason.
LEFT_TO_USER = {
    "TEMPORAL_API_KEY": "the bundled Temporal needs none; set it (and TEMPORAL_TLS_*) for Temporal Cloud",
    "TEMPORAL_PROFILE": "profiles are for a TOML file the containers do not have",
    "HITL_CODEC_TOKEN": "the Temporal UI cannot send a static token; the API port listens on 127.0.0.1",
    "HITL_TOOL_MODULES": "your own tools need your own image",
    "HITL_WORKER_IDENTITY": "the SDK's <pid>@<container> is unique per replica",
    "HITL_CONNECT_PATIENCE_SECONDS": "the default (60 s) outlasts the bundled Temporal's start, and compose restarts a worker that gave up",
    "HITL_API_HOST": "set on the api service only",
    "HITL_API_PORT": "set on the api service only",
    "HITL_UI_PORT": "the demo's own dev server only (./demo.sh); compose runs its own Temporal",
    "HITL_CORS_ORIGINS": "set on the api service only",
    "HITL_MCP_CONFIG": "MCP servers run inside the worker's image: build yours with them, mount the config and name it",
    "HITL_METRICS_PORT": "metrics are off by default: set it, and publish the port, where Prometheus scrapes (docs/observability.md)",
    "HITL_API_METRICS_PORT": "likewise for the API's own metrics",
    "HITL_EVIDENCE_KEY": "the operator's signing key for `starter.py evidence`, kept where they export bundles, not in a service",
    "HITL_OTEL": "tracing needs the tracing extra in your image (docs/observability.md)",
    "HITL_CLI_WAIT_SECONDS": "how long starter.py waits for an answer: the person's shell, not the services",
    "HITL_API_TOKENS": "people's tokens are yours: mount a tokens file on the api service and name it (README, HTTP API)",
    "HITL_OIDC_ISSUER": "single sign-on is yours: set your provider's issuer and audience on the api service (docs/security.md)",
    "HITL_OIDC_AUDIENCE": "likewise",
    "HITL_OIDC_PERSON_CLAIM": "likewise (default email)",
    "HITL_OIDC_GROUPS_CLAIM": "likewise (default groups)",
    "HITL_OIDC_CLIENT_ID": "likewise: the web inbox's client at your provider, for its sign-in",
    "HITL_OIDC_SCOPES": "likewise (default openid email)",
    "HITL_OIDC_MAX_TOKEN_SECONDS": "likewise (default a day)",
    "HITL_POLICY": "the operator's policy is yours: mount the file on the worker and api services and name it",
    "HITL_CHANNELS": "decision channels are yours: mount the file on the worker, name it, and set the secrets it names",
    "HITL_ALLOWED_HOSTS": "the published port answers to localhost; list your proxy's name if you put one in front",
    "HITL_API_READS_PER_PERSON": "the default (8 reads in flight per person) suits one machine",
    "HITL_API_STREAMS_PER_PERSON": "the default (10 open event streams per person) suits one machine",
    "HITL_API_SESSIONS_PER_PERSON": "the default (20 running sessions per person) suits one machine",
    "HITL_API_CLOSED_CACHE": "the default (256 answers about closed sessions) suits one machine",
    "HITL_API_CLOSED_CACHE_BYTES": "the default (64 MB of answers about closed sessions) suits one machine",
    "HITL_CODEC_CONCURRENCY": "the default (4 codec requests at once) suits one UI",
    "HITL_CODEC_MAX_BYTES": "the default (8 MB, over Temporal's own 2 MB payload limit) suits every history",
}
# Read from the environment by the Temporal SDK's own configuration (temporalio.envconfig).
ENVCONFIG = {"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY", "TEMPORAL_PROFILE"}
AGENT_SERVICES = ("worker", "api")
ONE_SHOT = ("temporal-schema", "temporal-setup")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def variables_the_code_reads() -> set[str]:
    """Every HITL_/TEMPORAL_/OPENAI_ name quoted in the product's code (tests and bench excluded)."""
    names: set[str] = set()
    for path in ROOT.rglob("*.py"):
        if {"tests", "bench", ".venv", "build"} & set(path.relative_to(ROOT).parts):
            continue
        names |= set(re.findall(r"[\"']((?:HITL|TEMPORAL|OPENAI)_[A-Z0-9_]+)[\"']", path.read_text()))
    return names | ENVCONFIG


def test_every_variable_the_code_reads_is_set_for_the_agent_or_deliberately_left_to_the_user(
    services: dict[str, dict[str, Any]]
) -> None:
    worker, api = (services[name]["environment"] for name in AGENT_SERVICES)
    set_here = set(worker) | set(api)
    missing = variables_the_code_reads() - set_here - set(LEFT_TO_USER)
    assert not missing, f"read by the code, neither set in docker-compose.yml nor in LEFT_TO_USER: {sorted(missing)}"
    stale = set(LEFT_TO_USER) - variables_the_code_reads()
    assert not stale, f"LEFT_TO_USER names variables nothing reads: {sorted(stale)}"
    for environment in (worker, api):
        assert environment["TEMPORAL_ADDRESS"] == "temporal:7233"
        assert environment["HITL_ENCRYPTION_KEY"].startswith("${HITL_ENCRYPTION_KEY:?"), "encryption is required"


def test_every_interpolated_variable_is_explained_in_env_example(compose: dict[str, Any]) -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    interpolated = set(re.findall(r"(?<!\$)\$\{([A-Z0-9_]+)", text))
    documented = set(re.findall(r"^([A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.MULTILINE))
    assert interpolated <= documented, f"missing from .env.example: {sorted(interpolated - documented)}"
    required = set(re.findall(r"\$\{([A-Z0-9_]+):\?", text))
    assert required == {"POSTGRES_PASSWORD", "HITL_ENCRYPTION_KEY"}
    assert ".env" in (ROOT / ".gitignore").read_text().split()


def test_a_copied_env_example_is_refused_until_its_secrets_are_filled_in() -> None:
    """`cp .env.example .env` then `docker compose up` must stop at the missing secrets, not run
    PostgreSQL with a password everyone who read the example knows: compose's `${NAME:?...}`
    refuses a variable that is unset or empty, so the example leaves every required one empty."""
    text = (ROOT / "docker-compose.yml").read_text()
    required = set(re.findall(r"\$\{([A-Z0-9_]+):\?", text))
    example = dict(re.findall(r"^([A-Z0-9_]+)=(.*)$", (ROOT / ".env.example").read_text(), re.MULTILINE))
    filled_in = {name: example[name] for name in required if example.get(name, "").strip()}
    assert not filled_in, f".env.example gives required secrets a value that compose would accept: {filled_in}"


def test_images_are_pinned_and_the_agent_services_run_the_products_commands(
    services: dict[str, dict[str, Any]]
) -> None:
    for name, service in services.items():
        image = service.get("image", "")
        assert "build" in service or re.search(r":(\$\{[A-Z_]+:-[\w.]+\}|[\w.]+)$", image), f"{name}: {image!r}"
        assert not image.endswith(":latest"), name
    assert services["temporal"]["image"].startswith("temporalio/server:")
    assert services["temporal"]["environment"]["DB"] == "postgres12"
    assert services["postgresql"]["image"].startswith("postgres:")
    assert services["worker"]["command"] == ["python", "worker.py"]
    assert services["api"]["command"] == ["python", "starter.py", "serve"]
    assert all(services[name]["build"] == "." for name in AGENT_SERVICES)


def test_the_ui_reads_payloads_through_the_apis_codec_endpoint(services: dict[str, dict[str, Any]]) -> None:
    api, ui = services["api"], services["temporal-ui"]
    port = api["environment"]["HITL_API_PORT"]
    assert api["environment"]["HITL_API_HOST"] == "0.0.0.0"
    assert f"127.0.0.1:{port}:{port}" in api["ports"]
    assert ui["environment"]["TEMPORAL_CODEC_ENDPOINT"] == f"http://localhost:{port}{codec_router.prefix}"
    published_ui = ui["ports"][0].rsplit(":", 2)
    assert f"http://localhost:{published_ui[1]}" in api["environment"]["HITL_CORS_ORIGINS"].split(",")
    assert f"http://127.0.0.1:{port}/healthz" in " ".join(api["healthcheck"]["test"])


def test_the_setup_service_creates_every_search_attribute_the_sessions_use(
    services: dict[str, dict[str, Any]]
) -> None:
    script = "\n".join(services["temporal-setup"]["command"])
    for name, kind in SEARCH_ATTRIBUTES.items():
        assert f"{name}={kind}" in script
    assert "temporal operator search-attribute create" in script
    assert "temporal operator namespace create" in script


def test_dependencies_wait_for_health_or_completion_and_long_running_services_restart(
    services: dict[str, dict[str, Any]]
) -> None:
    for name, service in services.items():
        for needed, rule in (service.get("depends_on") or {}).items():
            assert needed in services, f"{name} depends on unknown {needed}"
            condition = rule["condition"]
            if needed in ONE_SHOT:
                assert condition == "service_completed_successfully", f"{name} -> {needed}"
            else:
                assert condition == "service_healthy" and "healthcheck" in services[needed], f"{name} -> {needed}"
        if name in ONE_SHOT:
            assert service["restart"].startswith("on-failure"), name
        else:
            assert service["restart"] == "unless-stopped", name
    # The UI is the one long-running service without a probe: nothing waits for it.
    probed = {name for name, service in services.items() if "healthcheck" in service}
    assert probed == set(services) - set(ONE_SHOT) - {"temporal-ui"}
    assert services["worker"]["healthcheck"]["test"] == ["CMD", "python", "worker.py", "--check"]
    assert services["worker"]["environment"]["HITL_WORKER_HEARTBEAT"], "the file --check reads, which the worker writes"


# What an installed wheel puts on sys.path: the top level the users asked for and one package.
INSTALLED_TOP_LEVEL = {"workflows", "activities", "hitl", "worker", "starter"}
NOT_INSTALLED = {"tests", "bench"}  # run from a checkout only


def users_own_files(root: Path) -> set[str]:
    """What .gitignore lists by name: files the README and docs/ ask a user to create in the checkout
    (my_tools.py, say), which are theirs, not the package's."""
    ignore = root / ".gitignore"
    lines = ignore.read_text().splitlines() if ignore.exists() else []
    return {line.strip() for line in lines if line.strip() and not line.startswith("#") and "/" not in line and "*" not in line}


def modules_here(root: Path) -> set[str]:
    """The checkout's top-level modules and packages, without the user's own files."""
    own = users_own_files(root)
    return ({path.stem for path in root.glob("*.py") if path.name not in own}
            | {path.parent.name for path in root.glob("*/__init__.py")})


def test_a_users_own_module_in_the_checkout_is_not_the_packages(tmp_path: Path) -> None:
    """docs/interface.md puts my_tools.py in the checkout and .gitignore lists it: not a module to declare."""
    (tmp_path / ".gitignore").write_text("# yours\nmy_tools.py\n*.egg-info/\n")
    (tmp_path / "my_tools.py").write_text("")
    (tmp_path / "worker.py").write_text("")
    (tmp_path / "hitl").mkdir()
    (tmp_path / "hitl" / "__init__.py").write_text("")
    assert modules_here(tmp_path) == {"worker", "hitl"}
    assert "my_tools.py" in users_own_files(ROOT)


def test_the_dockerfile_installs_the_lock_and_copies_every_module_the_package_declares() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()  # tomllib is 3.11+; these lines are plain lists
    setuptools = {key: ast.literal_eval(value)
                  for key, value in re.findall(r"^(include|py-modules) = (\[.*\])$", pyproject, re.MULTILINE)}
    packages = find_packages(str(ROOT), include=setuptools["include"])
    top_level = {name.split(".")[0] for name in packages} | set(setuptools["py-modules"])
    assert top_level == INSTALLED_TOP_LEVEL, f"installed top-level names: {sorted(top_level)}"
    here = modules_here(ROOT)
    assert here - NOT_INSTALLED == INSTALLED_TOP_LEVEL, f"not declared: {sorted(here - NOT_INSTALLED - INSTALLED_TOP_LEVEL)}"
    copied = set(re.findall(r"^COPY (.+) \./?\S*$", dockerfile, re.MULTILINE))
    copied_names = {word.rstrip("/") for line in copied for word in line.split()}
    for package in {name.split(".")[0] for name in packages}:
        assert package in copied_names, f"Dockerfile does not copy {package}"
    for module in setuptools["py-modules"]:
        assert f"{module}.py" in copied_names, f"Dockerfile does not copy {module}.py"
    assert "pip install --no-cache-dir --require-hashes -r requirements.lock" in dockerfile
    assert "--no-deps ." in dockerfile


def test_the_composed_server_refuses_updates_too_large_to_answer(services: dict[str, dict[str, Any]]) -> None:
    """The worker's answer to an Update echoes it; the server must not admit one it cannot answer."""
    from hitl.devserver import MAX_UPDATE_REQUEST_BYTES

    temporal = services["temporal"]
    mounted = {volume.split(":")[0]: volume.split(":")[1] for volume in temporal["volumes"]}
    assert mounted["./temporal-dynamic-config.yaml"] == temporal["environment"]["DYNAMIC_CONFIG_FILE_PATH"]
    config = yaml.safe_load((ROOT / "temporal-dynamic-config.yaml").read_text())
    assert config["history.maxInFlightUpdatePayloads"] == [{"value": MAX_UPDATE_REQUEST_BYTES}]
