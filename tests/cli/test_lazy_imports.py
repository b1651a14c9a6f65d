"""A command imports only what it uses: ``--help`` nothing of pydantic, the container or the use
cases; ``show`` and ``list`` neither the model library nor the container, nothing of the
scheduler nor of the lifecycle's use cases (``show --verify`` validates through the container);
``history`` the event model, but neither the container nor the scheduler nor the lifecycle;
``metrics`` the models but neither the container nor the scheduler's and lifecycle's side;
nothing but ``kind = "rest"`` and the commands that ask a registry (``resolve``) the HTTP client,
and those nothing of the scheduler; nothing that checks no signature (a dry run of a pin
without ``require_signature``, ``status``, ``submit``) the registry client or ``cryptography``.
Each command runs in a fresh process of the installed package, which then reports the modules
it loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import slurm_image.composition.container as container_module
from publish_support import chain_json, inspection
from slurm_image import Lifecycles
from slurm_image.domain.paths import AttemptLayout
from slurm_image.domain.profile import parse_profile
from slurm_image.domain.request import make_request
from support import PACKAGE_DIR

SOURCE = "registry.example.org/team/app:1@sha256:" + "5" * 64
SQSH = b"hsqs" + bytes(60) + b"the image"

# Runs the console entry point, then writes the names of the loaded modules to $REPORT.
PROBE = """
import json, os, sys
from slurm_image.composition.main import main
try:
    main(sys.argv[1:])
except SystemExit as done:
    code = done.code
else:
    code = 0
with open(os.environ["REPORT"], "w") as report:
    json.dump({"code": code, "modules": sorted(sys.modules)}, report)
"""

# What only lifecycles and publication need: resolving a name loads none of it.
LIFECYCLE_SIDE = (
    "slurm_image.application.observe",
    "slurm_image.application.wait",
    "slurm_image.application.submit",
    "slurm_image.application.prepare",
    "slurm_image.application.publish",
    "slurm_image.application.maintain",
    "slurm_image.domain.plan",
    "slurm_image.domain.script",
)
# What only talking to a registry or checking a signature needs.
REGISTRY_SIDE = (
    "httpx",
    "cryptography",
    "slurm_image.adapters.oci_registry",
    "slurm_image.adapters.registry_signatures",
    "slurm_image.application.signature_check",
    "slurm_image.application.resolve",
)
# What only the gateway serving needs (dependency-injector would import the first two when they
# are installed: composition/lean_imports.py).
WEB = (
    "fastapi",
    "starlette",
    "uvicorn",
    "jinja2",
    "slurm_image.gateway",
    "slurm_image.gateway.pages",
)
SCHEDULER = (
    "httpx",
    "tenacity",
    "slurm_image.adapters.slurmrest",
    "slurm_image.adapters.sbatch",
    "slurm_image.adapters.memory",
    "slurm_image.submitters",
)


def loaded(tmp_path: Path, *args: str) -> set[str]:
    modules, done = run_probe(tmp_path, *args)
    assert done.returncode == 0, done.stderr
    return modules


def run_probe(tmp_path: Path, *args: str) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """The modules ``slurm-image ARGS`` loaded, and its process (its exit code, its stderr)."""
    report = tmp_path / "modules.json"
    env = {key: value for key, value in os.environ.items() if not key.startswith("SLURM_IMAGE_")}
    env["PYTHONPATH"] = PACKAGE_DIR
    env["REPORT"] = str(report)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    result = json.loads(report.read_text())
    done.returncode = result["code"] or 0
    return set(result["modules"]), done


def of(modules: set[str], *packages: str) -> list[str]:
    """The modules of ``packages`` (each a package or module name) among ``modules``."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def _profile(path: Path, root: Path, kind: str, sbatch: Path) -> Path:
    path.write_text(
        f'workspace_root = "{root}"\n'
        "[image_build]\n"
        'partition = "cpu"\ncpus_per_task = 1\nmemory = "1G"\ntime_limit = "0:10:00"\n'
        f'[submitter]\nkind = "{kind}"\n'
        f'[submitter.sbatch]\nsbatch = "{sbatch}"\n'
    )
    return path


@pytest.fixture
def site(tmp_path: Path) -> dict[str, Path]:
    """A workspace with one published alias (``app``), profiles for the in-memory scheduler
    and for a stub ``sbatch`` that answers with a job id at once."""
    root = tmp_path / "ws"
    root.mkdir(mode=0o700)
    sbatch = tmp_path / "sbatch"
    sbatch.write_text("#!/bin/sh\ncat >/dev/null\necho 4242\n")
    sbatch.chmod(0o755)
    squeue = tmp_path / "squeue"  # the one job, running
    squeue.write_text("#!/bin/sh\necho '4242|RUNNING|2026-01-01T00:00:00|Unknown|None|0:0|'\n")
    squeue.chmod(0o755)
    fake = _profile(tmp_path / "fake.toml", root, "fake", sbatch)
    lifecycles = Lifecycles.from_profile(str(fake), environ={})
    request = make_request("import_oci", name="app", role="client", source=SOURCE)
    prepared = lifecycles.stage(request)
    submission = lifecycles.container.submit()(prepared)
    Path(prepared.plan.paths.sqsh).write_bytes(SQSH)
    Path(prepared.plan.paths.result).write_bytes(inspection("client", SQSH))
    pinned = prepared.plan.source_digest
    assert pinned is not None
    Path(prepared.plan.paths.job_dir, "chain.json").write_bytes(chain_json(pinned))
    Path(prepared.plan.paths.job_dir, "architecture").write_bytes(b"x86_64\n")
    lifecycles.container.submitter().finish(submission.job_id, 0)
    lifecycles.publish(prepared.lifecycle_id)
    return {"fake": fake, "sbatch": _profile(tmp_path / "sbatch.toml", root, "sbatch", sbatch)}


def test_help_loads_no_model_no_container_and_no_use_case(tmp_path: Path) -> None:
    modules = loaded(tmp_path, "--help")
    assert "slurm_image.cli.main" in modules
    assert (
        of(
            modules,
            "pydantic",
            "dependency_injector",
            "httpx",
            "importlib.metadata",
            "slurm_image.adapters",
            "slurm_image.application",
            "slurm_image.composition.container",
        )
        == []
    )


@pytest.mark.parametrize(
    "command",
    [
        ["show", "app", "--json"],
        ["list", "--json"],
        ["--quiet", "show", "app"],
        ["path", "app", "--json"],
        ["path", "app"],
    ],
)
def test_show_and_list_load_no_model_library_no_container_and_nothing_of_the_scheduler(
    tmp_path: Path, site: dict[str, Path], command: list[str]
) -> None:
    modules = loaded(tmp_path, "--profile", str(site["sbatch"]), *command)
    assert "slurm_image.application.catalog_reader" in modules
    assert "slurm_image.adapters.local_store" in modules
    assert of(modules, "pydantic", "pydantic_core", "dependency_injector", "asyncio") == []
    assert of(modules, "slurm_image.composition.container", "slurm_image.composition.api") == []
    assert of(modules, *SCHEDULER) == []
    assert of(modules, *LIFECYCLE_SIDE) == []


@pytest.mark.parametrize("command", [["show", "missing"], ["show", "missing", "--json"]])
def test_show_of_a_missing_alias_fails_as_cheaply_as_a_lookup(
    tmp_path: Path, site: dict[str, Path], command: list[str]
) -> None:
    modules, done = run_probe(tmp_path, "--profile", str(site["sbatch"]), *command)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "slurm-image: error: name: no alias missing is published (see: slurm-image list)\n"
    )
    assert "slurm_image.application.catalog_reader" in modules
    assert of(modules, "pydantic", "pydantic_core", "dependency_injector", "asyncio") == []
    assert of(modules, "slurm_image.composition.container", "slurm_image.composition.api") == []
    assert of(modules, *SCHEDULER) == []
    assert of(modules, *LIFECYCLE_SIDE) == []


@pytest.mark.parametrize(
    "command", [["history", "--json"], ["history", "app", "--since", "2000-01-01"]]
)
def test_history_loads_no_container_nothing_of_the_scheduler_and_no_use_case(
    tmp_path: Path, site: dict[str, Path], command: list[str]
) -> None:
    modules, done = run_probe(tmp_path, "--profile", str(site["sbatch"]), *command)
    assert done.returncode == 0, done.stderr
    assert "app" in done.stdout  # the publication of the fixture is in it
    assert {"slurm_image.adapters.local_history", "slurm_image.application.read_history"} <= (
        modules
    )
    assert of(modules, "dependency_injector", "asyncio") == []
    assert of(modules, "slurm_image.composition.container", "slurm_image.composition.api") == []
    assert of(modules, "slurm_image.domain.profile", "slurm_image.application.history") == []
    assert of(modules, *SCHEDULER) == []
    assert of(modules, *LIFECYCLE_SIDE) == []


@pytest.mark.parametrize("command", [["metrics"], ["metrics", "--json"]])
def test_metrics_loads_no_container_nothing_of_the_scheduler_and_no_lifecycle_use_case(
    tmp_path: Path, site: dict[str, Path], command: list[str]
) -> None:
    modules = loaded(tmp_path, "--profile", str(site["sbatch"]), *command)
    assert {"slurm_image.application.metrics", "slurm_image.adapters.local_history"} <= modules
    assert of(modules, "dependency_injector", "asyncio") == []
    assert of(modules, "slurm_image.composition.container", "slurm_image.composition.api") == []
    assert of(modules, *SCHEDULER) == []
    assert of(modules, *LIFECYCLE_SIDE) == []
    # the text's library only when the text is written
    assert bool(of(modules, "prometheus_client")) == ("--json" not in command)


def test_show_verify_validates_and_rehashes_without_the_scheduler(
    tmp_path: Path, site: dict[str, Path]
) -> None:
    modules = loaded(tmp_path, "--profile", str(site["sbatch"]), "show", "app", "--verify")
    assert "slurm_image.adapters.local_store" in modules
    assert {"slurm_image.domain.profile", "slurm_image.application.catalog"} <= modules
    assert "slurm_image.composition.container" in modules
    assert of(modules, *SCHEDULER) == []


def test_submit_through_sbatch_never_loads_the_http_client(
    tmp_path: Path, site: dict[str, Path]
) -> None:
    sbatch = Lifecycles.from_profile(str(site["sbatch"]), environ={})
    staged = sbatch.import_image(SOURCE, name="other", role="client", submit=False)
    modules = loaded(tmp_path, "--profile", str(site["sbatch"]), "submit", staged.lifecycle_id)
    assert "slurm_image.adapters.sbatch" in modules
    assert of(modules, "httpx", "slurm_image.adapters.slurmrest") == []
    assert of(modules, "slurm_image.application.prepare") == []
    assert of(modules, *REGISTRY_SIDE) == []
    layout = AttemptLayout(sbatch.profile.workspace_root, staged.lifecycle_id)
    assert json.loads(Path(layout.submission_record).read_text())["job_id"] == "4242"
    status, done = run_probe(
        tmp_path, "--profile", str(site["sbatch"]), "--json", "status", staged.lifecycle_id
    )
    assert done.returncode == 0, done.stderr
    assert "RUNNING" in done.stdout
    assert "slurm_image.application.observe" in status
    assert of(status, *REGISTRY_SIDE) == []


@pytest.mark.parametrize(
    "policy",
    ["", '[policy]\nallowed_registries = ["registry.example.org/team"]\n'],
    ids=["no policy", "allowed registries"],
)
def test_a_dry_run_of_a_pin_loads_no_registry_client_and_no_cryptography(
    tmp_path: Path, site: dict[str, Path], policy: str
) -> None:
    profile = tmp_path / "policy.toml"
    profile.write_text(site["sbatch"].read_text() + policy)
    modules, done = run_probe(
        tmp_path, "--profile", str(profile), "--json",
        "import", SOURCE, "--name", "app2", "--role", "client", "--dry-run",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["plan"]["request"]["source"] == SOURCE
    assert "slurm_image.application.prepare" in modules
    assert of(modules, *REGISTRY_SIDE) == []
    assert of(modules, *SCHEDULER) == []
    assert of(modules, *WEB) == []


def test_the_doctor_commands_default_timeout_is_the_doctors() -> None:
    from slurm_image.application.doctor import DEFAULT_TIMEOUT_S
    from slurm_image.cli import doctor_command

    assert doctor_command.DEFAULT_TIMEOUT_S == DEFAULT_TIMEOUT_S


def test_site_submitters_are_looked_up_only_for_a_kind_not_built_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    looked_up: list[str] = []

    def entry_points(*, group: str) -> list[object]:
        looked_up.append(group)
        return []

    monkeypatch.setattr(container_module, "entry_points", entry_points)
    build = {"partition": "cpu", "cpus_per_task": 1, "memory": "1G", "time_limit": "0:10:00"}
    for kind in ("sbatch", "rest", "fake"):
        rest = {"url": "unix:///run/slurmrestd.sock"}
        profile = parse_profile(
            {
                "workspace_root": "/srv/ws",
                "image_build": build,
                "submitter": {"kind": kind, "rest": rest},
            }
        )
        container_module.build_container(profile)
    assert looked_up == []
    profile = parse_profile(
        {"workspace_root": "/srv/ws", "image_build": build, "submitter": {"kind": "mysite"}}
    )
    container_module.build_container(profile)
    assert looked_up == [container_module.SUBMITTER_GROUP]


def test_resolve_loads_the_registry_client_and_nothing_of_the_scheduler_or_the_lifecycle(
    tmp_path: Path, site: dict[str, Path]
) -> None:
    # nothing listens on port 9 of 127.0.0.1: the command ends as soon as it fails to connect
    modules, done = run_probe(
        tmp_path, "--profile", str(site["sbatch"]), "resolve", "127.0.0.1:9/team/app:1",
        "--timeout", "1",
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert {"httpx", "slurm_image.adapters.oci_registry", "slurm_image.application.resolve"} <= (
        modules
    )
    assert of(modules, "slurm_image.adapters.slurmrest", "slurm_image.adapters.sbatch") == []
    assert of(modules, "slurm_image.submitters", "slurm_image.adapters.memory") == []
    assert of(modules, *LIFECYCLE_SIDE) == []
