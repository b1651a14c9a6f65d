"""The command line run in this process against a fake scheduler, for the CLI tests: ``main``
called with the arguments, its exit code and output captured, the container's submitter
replaced by one ``FakeSubmitter`` the test drives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import providers

import slurm_image.entrypoints.api as api
import slurm_image.entrypoints.cli as cli
from slurm_image.adapters.memory import FakeSubmitter
from slurm_image.ports.clock import Clock


class CliSite:
    def __init__(self, root: Path, capsys: Any, scheduler: FakeSubmitter) -> None:
        self.root, self.capsys, self.scheduler = root, capsys, scheduler

    def run(self, *args: str) -> tuple[int, str, str]:
        try:
            cli.main(list(args))
            code = 0
        except SystemExit as done:
            code = int(done.code or 0)
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *args: str) -> Any:
        code, out, err = self.run(*args, "--json")
        assert code == 0, err
        return json.loads(out)


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
