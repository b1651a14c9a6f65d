"""The job's progress record under bash with the stand-in (docs/design.md, "Progress"): the
phases it passes, the download's counters as the verifying curl counts them, and the phase a
failing job ends in, with its exit code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import HTTP, Job, JobFactory, Standin

from slurm_image.domain.progress import load_progress


def snapshot(standin: Standin, job: Job, *hooks: str) -> Path:
    """Each hook appends the progress record as it is then to a log, one line per hook."""
    log = job.tmp / "progress-seen.jsonl"
    record = job.job_dir / "progress.json"
    standin.configure(hooks={hook: f"cat {record} >>{log}" for hook in hooks})
    return log


def seen(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def final(job: Job) -> dict[str, Any]:
    data = (job.job_dir / "progress.json").read_bytes()
    load_progress(data)  # the model reads what the job writes
    document: dict[str, Any] = json.loads(data)
    return document


@pytest.mark.e2e
def test_an_import_records_download_extract_squash_inspect_then_done(
    make_job: JobFactory, standin: Standin, registry_images: dict[str, str]
) -> None:
    job = make_job(
        operation="import_oci", role="client", source=registry_images["client"], environment=HTTP
    )
    log = snapshot(standin, job, "import_downloaded", "import_extracted", "import", "create")

    result = job.run()

    assert result.returncode == 0, result.stderr
    records = seen(log)
    assert len(records) == 4, records
    download, extract, squash, inspect = records
    assert download["phase"] == "download"
    assert download["layers_total"] >= 1
    assert download["layers_done"] == download["layers_total"]
    assert download["bytes_done"] == download["bytes_total"] > 0
    assert extract["phase"] == "extract"
    assert squash["phase"] == "squash"
    assert inspect["phase"] == "inspect"
    assert inspect["updated_at"] >= download["updated_at"]
    end = final(job)
    assert (end["phase"], end["ended"], end["exit_code"]) == ("done", "done", 0)
    assert not list(job.job_dir.glob("progress.json.*"))  # no temporary file left


def test_an_inspect_records_hash_bytes_of_the_image_then_inspect(
    make_job: JobFactory, standin: Standin, image: Any
) -> None:
    source = image("report")
    job = make_job(operation="inspect_sqsh", role="client", source=str(source))
    log = snapshot(standin, job, "create_before", "create")

    assert job.run().returncode == 0
    create, start = seen(log)
    assert create["phase"] == start["phase"] == "inspect"
    assert final(job)["phase"] == "done"
    # hashing started from byte 0 of the image's size: the record it wrote first
    assert "bytes_total" not in create


def test_an_import_failing_while_squashing_keeps_that_phase_and_its_exit_code(
    make_job: JobFactory, standin: Standin, registry_images: dict[str, str]
) -> None:
    job = make_job(
        operation="import_oci", role="client", source=registry_images["client"], environment=HTTP
    )
    standin.configure(fail={"import": 3})

    result = job.run()

    assert result.returncode == 3, result.stderr
    end = final(job)
    assert (end["phase"], end["ended"], end["exit_code"]) == ("squash", "failed", 3)


def test_a_failed_create_leaves_phase_inspect_with_the_job_exit_code(
    make_job: JobFactory, standin: Standin, image: Any
) -> None:
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))
    standin.configure(fail={"create": 5})

    result = job.run()

    assert result.returncode != 0
    end = final(job)
    assert (end["phase"], end["ended"], end["exit_code"]) == (
        "inspect",
        "failed",
        result.returncode,
    )


def test_a_job_refused_before_its_directories_are_checked_writes_no_record(
    make_job: JobFactory, standin: Standin, image: Any
) -> None:
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))

    result = job.run(env={"SLURM_RESTART_COUNT": "1"})

    assert result.returncode == 75
    assert not (job.job_dir / "progress.json").exists()


def test_a_staged_file_mismatch_ends_in_phase_checks(
    make_job: JobFactory, standin: Standin, image: Any
) -> None:
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))
    Path(job.paths.rc).chmod(0o700)
    Path(job.paths.rc).write_text("# changed\n")

    result = job.run()

    assert result.returncode == 70
    end = final(job)
    assert (end["phase"], end["ended"], end["exit_code"]) == ("checks", "failed", 70)
