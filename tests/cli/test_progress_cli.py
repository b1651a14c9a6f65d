"""``status`` and ``logs`` as a user runs them: the phase the job recorded in the text and JSON
output, the logs printed with their paths, and the refusals of ``logs`` (exit 2, naming why)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import providers

import slurm_image.cli.output as cli_output
import slurm_image.composition.api as api
import slurm_image.composition.main as cli
from slurm_image.adapters.memory import FakeSubmitter
from slurm_image.cli.arguments import Options
from slurm_image.domain.paths import AttemptLayout

SOURCE = "registry.example.org/team/app:1.0@sha256:" + "b" * 64
RECORD = (
    b'{"format": 1, "phase": "download", "updated_at": 1700000000, "layers_done": 1,'
    b' "layers_total": 4, "bytes_done": 3000000, "bytes_total": 12000000}\n'
)


@pytest.fixture
def scheduler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSubmitter:
    """A fake submitter shared by every command of the test, in a site of its own."""
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "slurm-image.toml").write_text(
        f'workspace_root = "{root}"\n'
        "[image_build]\n"
        'partition = "cpu"\ncpus_per_task = 2\nmemory = "4G"\ntime_limit = "1:00:00"\n'
        '[submitter]\nkind = "fake"\n'
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SLURM_IMAGE_PROFILE", raising=False)
    shared = FakeSubmitter()
    real_build = api.build_container

    def build(profile: Any = None) -> Any:
        container = real_build(profile)
        container.submitter.override(providers.Object(shared))
        return container

    monkeypatch.setattr(api, "build_container", build)
    return shared


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = 0
    try:
        cli.main(list(argv))
    except SystemExit as done:
        code = int(done.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def imported(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[str, AttemptLayout]:
    code, out, err = run(
        capsys, "import", SOURCE, "--name", "app", "--role", "client", "--json", *extra
    )
    assert code == 0, err
    lifecycle_id = json.loads(out)["lifecycle_id"]
    return lifecycle_id, AttemptLayout(str(Path.cwd() / "ws"), lifecycle_id)


def test_status_shows_the_phase_and_counters_in_text_and_json(
    scheduler: FakeSubmitter, capsys: pytest.CaptureFixture[str]
) -> None:
    lifecycle_id, layout = imported(capsys)
    (job,) = scheduler.jobs
    scheduler.start(job)
    Path(layout.progress_record).write_bytes(RECORD)

    code, out, _ = run(capsys, "status", lifecycle_id)
    assert code == 0
    assert "RUNNING" in out and "phase download 1/4 layers 3.0 MB of 12.0 MB" in out

    code, out, _ = run(capsys, "status", lifecycle_id, "--json")
    (entry,) = json.loads(out)["lifecycles"]
    assert entry["phase"] == "download"
    assert entry["progress"]["layers_total"] == 4


def test_logs_prints_both_logs_under_their_paths(
    scheduler: FakeSubmitter, capsys: pytest.CaptureFixture[str]
) -> None:
    lifecycle_id, layout = imported(capsys)
    (job,) = scheduler.jobs
    out_log, err_log = layout.job_logs(job)
    Path(out_log).write_text("stdout line\n")
    Path(err_log).write_text("slurm-image: importing\n")

    code, out, err = run(capsys, "logs", lifecycle_id)

    assert code == 0, err
    assert out == (f"==> {out_log} <==\nstdout line\n\n==> {err_log} <==\nslurm-image: importing\n")


HOSTILE_LOG = (
    "slurm-image: image sha256 " + "c" * 64 + "\n"
    "\x1b]0;owned\x07\x1b[2J\x1b[1A\rslurm-image: verified chain\tok\x00\x7f\n"
    "\u202egnp.exe \u00e9\u20ac\x9b[31m\n"
).encode() + b"\xe2\x82\n"


def test_logs_escapes_every_control_character_whoever_wrote_it(
    scheduler: FakeSubmitter, capsys: pytest.CaptureFixture[str]
) -> None:
    lifecycle_id, layout = imported(capsys)
    (job,) = scheduler.jobs
    Path(layout.job_logs(job)[1]).write_bytes(HOSTILE_LOG)

    code, out, err = run(capsys, "logs", lifecycle_id)

    assert code == 0, err
    printed = out.split(" <==\n")[-1]
    assert printed == (
        "slurm-image: image sha256 " + "c" * 64 + "\n"
        "\\x1b]0;owned\\x07\\x1b[2J\\x1b[1A\\x0dslurm-image: verified chain\tok\\x00\\x7f\n"
        "\\u202egnp.exe \u00e9\u20ac\\x9b[31m\n"
        "\ufffd\n"
    )
    assert all(c.isprintable() or c in "\t\n" for c in out)


def test_logs_follow_escapes_a_character_split_between_two_reads(
    scheduler: FakeSubmitter, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import slurm_image.application.logs as logs

    monkeypatch.setattr(logs, "CHUNK", 3)
    lifecycle_id, layout = imported(capsys)
    (job,) = scheduler.jobs
    scheduler.finish(job, 0)
    Path(layout.job_logs(job)[1]).write_bytes("ab\u20ac\x1b[2J\n".encode())

    code, out, _ = run(capsys, "logs", lifecycle_id, "--follow")

    assert code == 0
    assert out.endswith("ab\u20ac\\x1b[2J\n")


def test_logs_json_carries_the_text_as_it_is(
    scheduler: FakeSubmitter, capsys: pytest.CaptureFixture[str]
) -> None:
    lifecycle_id, layout = imported(capsys)
    (job,) = scheduler.jobs
    err_log = layout.job_logs(job)[1]
    Path(err_log).write_bytes(HOSTILE_LOG)

    code, out, err = run(capsys, "logs", lifecycle_id, "--json")

    assert code == 0, err
    data = json.loads(out)
    assert data["lifecycle_id"] == lifecycle_id
    texts = {entry["path"]: entry["text"] for entry in data["logs"]}
    assert texts[err_log] == HOSTILE_LOG.decode("utf-8", "replace")
    assert "\x1b]0;owned\x07" in texts[err_log]


def test_logs_follow_of_an_ended_job_prints_the_rest_and_exits_0(
    scheduler: FakeSubmitter, capsys: pytest.CaptureFixture[str]
) -> None:
    lifecycle_id, layout = imported(capsys)
    (job,) = scheduler.jobs
    scheduler.finish(job, 76)
    Path(layout.job_logs(job)[1]).write_text("slurm-image: error: no inspection result\n")

    code, out, _ = run(capsys, "logs", lifecycle_id, "--follow")

    assert code == 0
    assert out.endswith("slurm-image: error: no inspection result\n")


def test_logs_of_an_unknown_id_exits_2_naming_it(
    scheduler: FakeSubmitter, capsys: pytest.CaptureFixture[str]
) -> None:
    unknown = "img-" + "9" * 32
    code, out, err = run(capsys, "logs", unknown)
    assert code == 2 and out == ""
    assert unknown in err


def test_logs_of_a_lifecycle_never_submitted_exits_2_saying_why(
    scheduler: FakeSubmitter, capsys: pytest.CaptureFixture[str]
) -> None:
    lifecycle_id, _ = imported(capsys, "--no-submit")
    code, out, err = run(capsys, "logs", lifecycle_id)
    assert code == 2 and out == ""
    assert lifecycle_id in err and "never submitted" in err


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_wait_on_a_terminal_shows_one_live_line_per_lifecycle_with_phase_and_progress(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from slurm_image.application.status import LifecycleStatus
    from slurm_image.domain.job import JobState
    from slurm_image.domain.progress import load_progress

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("COLUMNS", "200")
    options = Options(profile=None, cluster=None, json=False, quiet=False, verbose=False)
    statuses = [
        LifecycleStatus("img-" + "1" * 32, "41", JobState.RUNNING, progress=load_progress(RECORD)),
        LifecycleStatus("img-" + "2" * 32, "42", JobState.PENDING),
    ]
    with cli_output.progress(options) as show:
        assert show is not None
        show(statuses, 75.0)
    shown = terminal.getvalue()
    assert "download 1/4 layers 3.0 MB of 12.0 MB" in shown
    assert "1m15s" in shown and "PENDING" in shown


def test_wait_off_a_terminal_shows_no_live_display(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    options = Options(profile=None, cluster=None, json=False, quiet=False, verbose=False)
    with cli_output.progress(options) as show:
        assert show is None
