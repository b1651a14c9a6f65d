"""``slurm-image import|inspect --no-submit``, ``submit ID`` and prepare+submit, as a user runs
them: staging in one process, ``submit`` in a fresh one.

"Nothing submitted" is observed in two ways. Across processes the fake scheduler lives only in
the submitting process, so the observable is the attempt's own record: ``submission.json`` and
the ``submission.claim`` made just before the scheduler is called are both absent — the claim is
written after verification and before ``submit`` reaches the submitter, so its absence shows the
scheduler was never asked. In-process, a shared FakeSubmitter is injected and must hold no job.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import providers

import slurm_image.composition.api as api
import slurm_image.composition.main as cli
from slurm_image.adapters.memory import FakeSubmitter
from slurm_image.domain.canonical import canonical_json
from slurm_image.domain.paths import AttemptLayout
from support import run_cli, unavailable

SOURCE = "registry.example.org/team/app:1.0@sha256:" + "b" * 64


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A directory holding ``slurm-image.toml`` (fake submitter) and an empty workspace."""
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "slurm-image.toml").write_text(
        f'workspace_root = "{root}"\n'
        "[image_build]\n"
        'partition = "cpu"\ncpus_per_task = 2\nmemory = "4G"\ntime_limit = "1:00:00"\n'
        '[submitter]\nkind = "fake"\n'
    )
    return tmp_path


@pytest.fixture
def stage(site: Path, capsys, monkeypatch) -> Any:
    monkeypatch.chdir(site)
    monkeypatch.delenv("SLURM_IMAGE_PROFILE", raising=False)
    return lambda: _stage(site, capsys)


def _stage(site: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, AttemptLayout]:
    """``import --no-submit --json`` through the CLI's own entry point, in this process."""
    cli.main(["import", SOURCE, "--name", "app", "--role", "client", "--no-submit", "--json"])
    output = json.loads(capsys.readouterr().out)
    layout = AttemptLayout(str(site / "ws"), output["lifecycle_id"])
    assert output["job_directory"] == layout.job_dir
    return output["lifecycle_id"], layout


def nothing_submitted(layout: AttemptLayout) -> bool:
    return not any(
        os.path.lexists(path) for path in (layout.submission_record, layout.submission_claim)
    )


def test_an_untouched_staged_lifecycle_submits(site: Path, stage) -> None:
    lifecycle_id, layout = stage()
    result = run_cli("submit", lifecycle_id, "--json", cwd=site)
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout)
    assert output["lifecycle_id"] == lifecycle_id and output["job_id"].isdecimal()
    record = json.loads(Path(layout.submission_record).read_text())
    assert (record["job_id"], record["submitter"]) == (output["job_id"], "fake")

    again = run_cli("submit", lifecycle_id, cwd=site)
    assert again.returncode == 6
    assert "submitted already" in again.stderr


def _append_line(layout: AttemptLayout) -> None:
    with open(layout.in_job("job.sbatch"), "ab") as script:
        script.write(b"echo tampered\n")


def _symlink_to_copy(layout: AttemptLayout) -> None:
    script = layout.in_job("job.sbatch")
    copy = f"{layout.root}/job.sbatch.copy"
    shutil.copy2(script, copy)
    os.unlink(script)
    os.symlink(copy, script)


def _edit_plan(layout: AttemptLayout) -> None:
    plan = json.loads(Path(layout.plan).read_text())
    plan["profile"]["image_build"]["partition"] = "other"
    Path(layout.plan).write_bytes(canonical_json(plan))


def _same_size_edit(layout: AttemptLayout) -> None:
    path = Path(layout.in_job("job.sbatch"))
    data = path.read_bytes()
    edited = data.replace(b"--partition=cpu", b"--partition=gpu", 1)
    assert len(edited) == len(data) and edited != data
    path.chmod(0o700)
    path.write_bytes(edited)
    path.chmod(0o500)


TAMPERING: dict[str, Any] = {
    "a line appended to the script": _append_line,
    "the script replaced by a symlink to a copy": _symlink_to_copy,
    "the plan edited": _edit_plan,
    "a same-size edit of the script": _same_size_edit,
}


@pytest.mark.parametrize("tamper", list(TAMPERING), ids=list(TAMPERING))
def test_submit_after_tampering_exits_5_and_submits_nothing(site: Path, stage, tamper) -> None:
    lifecycle_id, layout = stage()
    TAMPERING[tamper](layout)
    result = run_cli("submit", lifecycle_id, cwd=site)
    assert result.returncode == 5, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("slurm-image: error: ")
    assert nothing_submitted(layout)


def test_submit_after_tampering_never_reaches_the_scheduler(site: Path, stage, monkeypatch) -> None:
    lifecycle_id, layout = stage()
    _append_line(layout)
    scheduler = FakeSubmitter()
    real_build = api.build_container

    def build_with_shared_scheduler(profile: Any = None) -> Any:
        container = real_build(profile)
        container.submitter.override(providers.Object(scheduler))
        return container

    monkeypatch.setattr(api, "build_container", build_with_shared_scheduler)
    with pytest.raises(SystemExit) as done:
        cli.main(["submit", lifecycle_id])
    assert done.value.code == 5
    assert scheduler.jobs == {} and scheduler.calls["submit"] == 0
    assert nothing_submitted(layout)


def test_import_prepares_and_submits_with_the_configured_submitter(site: Path) -> None:
    result = run_cli("import", SOURCE, "--name", "app", "--role", "client", "--json", cwd=site)
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout)
    layout = AttemptLayout(str(site / "ws"), output["lifecycle_id"])
    assert output["job_id"].isdecimal()
    assert json.loads(Path(layout.submission_record).read_text())["job_id"] == output["job_id"]


def _created(site: Path) -> list[str]:
    return sorted(str(path) for path in (site / "ws").rglob("*"))


@pytest.mark.parametrize(
    ("args", "env_kind"),
    [
        (["import", "registry.example.org/app:latest", "--name", "app", "--role", "client"], None),
        (["import", SOURCE, "--name", "-bad", "--role", "client", "--no-submit"], None),
        (["inspect", "relative.sqsh", "--name", "app", "--role", "client", "--no-submit"], None),
        (["import", SOURCE, "--name", "app", "--role", "client"], "kind-not-registered"),
    ],
)
def test_invalid_input_exits_2_before_anything_is_created(site: Path, args, env_kind) -> None:
    if env_kind:
        profile = site / "slurm-image.toml"
        profile.write_text(profile.read_text().replace('kind = "fake"', 'kind = "nosuchsite"'))
    result = run_cli(*args, cwd=site)
    assert result.returncode == 2, result.stderr
    assert _created(site) == []


def test_submit_of_an_unknown_lifecycle_exits_2(site: Path) -> None:
    result = run_cli("submit", "img-" + "0" * 32, cwd=site)
    assert result.returncode == 2
    assert "no staged attempt" in result.stderr


def test_import_into_a_read_only_workspace_exits_2_and_creates_nothing(site: Path) -> None:
    """The workspace is bind-mounted read-only in a private mount namespace (`unshare -m`)."""
    unshare = shutil.which("unshare")
    root = str(site / "ws")
    probe = subprocess.run([unshare or "unshare", "-m", "true"], capture_output=True, check=False)
    if unshare is None or probe.returncode != 0:
        unavailable("unshare -m is not permitted here")
    wrapper = (
        unshare,
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        f'mount --bind -o ro "{root}" "{root}" && exec "$@"',
        "sh",
    )
    result = run_cli(
        "import",
        SOURCE,
        "--name",
        "app",
        "--role",
        "client",
        "--no-submit",
        cwd=site,
        prefix=wrapper,
    )
    assert result.returncode == 2, result.stderr
    assert "Read-only file system" in result.stderr
    assert _created(site) == []
