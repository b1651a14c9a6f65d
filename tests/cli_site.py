"""The command line run in this process against a fake scheduler, for the CLI tests: ``main``
called with the arguments, its exit code and output captured, the container's submitter
replaced by one ``FakeSubmitter`` the test drives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import providers

import slurm_image.composition.api as api
import slurm_image.composition.main as cli
from publish_support import SQSH_BYTES, chain_json, inspection
from slurm_image.adapters.memory import FakeSubmitter
from slurm_image.domain.paths import AttemptLayout
from slurm_image.ports.clock import Clock


def run_main(capsys: Any, *args: str) -> tuple[int, str, str]:
    """``slurm-image ARGS`` in this process: its exit code, stdout and stderr."""
    try:
        cli.main(list(args))
        code = 0
    except SystemExit as done:
        code = int(done.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


class CliSite:
    def __init__(self, root: Path, capsys: Any, scheduler: FakeSubmitter) -> None:
        self.root, self.capsys, self.scheduler = root, capsys, scheduler

    def run(self, *args: str) -> tuple[int, str, str]:
        return run_main(self.capsys, *args)

    def json(self, *args: str) -> Any:
        code, out, err = self.run(*args, "--json")
        assert code == 0, err
        return json.loads(out)

    def publish_resolved(
        self, tag: str, name: str, manifest: str, arch: str = "x86_64"
    ) -> dict[str, Any]:
        """``import TAG --resolve``, its job finished as the job would finish it (a candidate,
        its inspection, the verified chain to ``manifest``), and ``publish``: an entry that
        records the tag."""
        submitted = self.json(
            "import", tag, "--resolve", "--name", name, "--role", "client", "--arch", arch
        )
        attempt = AttemptLayout(str(self.root), submitted["lifecycle_id"])
        pin = json.loads(Path(attempt.plan).read_text())["source_digest"]
        candidate = SQSH_BYTES + name.encode()
        Path(attempt.in_job("candidate.sqsh")).write_bytes(candidate)
        Path(attempt.in_job("output/inspection.json")).write_bytes(
            inspection("client", candidate, machine=arch)
        )
        Path(attempt.chain_record).write_bytes(chain_json(pin, manifest))
        Path(attempt.architecture_record).write_bytes(f"{arch}\n".encode())
        self.scheduler.finish(submitted["job_id"])
        published: dict[str, Any] = self.json("publish", submitted["lifecycle_id"])
        return published


def fake_scheduler(
    directory: Path, monkeypatch: pytest.MonkeyPatch, clock: Clock | None = None
) -> FakeSubmitter:
    """Run the command line from ``directory`` (its ``slurm-image.toml``) with every container's
    submitter replaced by the one fake scheduler returned (dating its jobs by ``clock``, else
    the system's)."""
    monkeypatch.chdir(directory)
    monkeypatch.delenv("SLURM_IMAGE_PROFILE", raising=False)
    scheduler = FakeSubmitter(clock=clock)
    real_build = api.build_container

    def build(profile: Any = None) -> Any:
        container = real_build(profile)
        container.submitter.override(providers.Object(scheduler))
        return container

    monkeypatch.setattr(api, "build_container", build)
    return scheduler
