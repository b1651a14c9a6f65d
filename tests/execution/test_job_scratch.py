"""Nothing of the job stays on the node (docs/design.md, "The batch job", step 4): whatever way
it ends, its EXIT trap removes the whole scratch, including the mount points Enroot makes with
mode 0 and fuse-overlayfs's opaque markers inside them (an ordinary user's rm alone cannot), on
both inspection paths, and says so in one line when it cannot."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from harness import (
    HTTP,
    INSPECTION_PATHS,
    Job,
    JobFactory,
    Result,
    Standin,
    install_failing_rm,
)
from test_untrusted_image import AttackImage, attack_image

from clusters import TEST_SQUASH_OPTIONS
from lying_registry import CLIENT, NOPYTHON, Answer, LyingRegistry, lying_registry, pinned

__all__ = ["attack_image"]


@pytest.fixture(params=INSPECTION_PATHS)
def inspection_path(request: pytest.FixtureRequest) -> str:
    """Root's job unpacks; an ordinary user's mounts an overlay (fuse-overlayfs)."""
    return str(request.param)


def nothing_left(job: Job, result: Result | None = None) -> None:
    assert job.leftover_scratch() == []
    assert not list(job.scratch.glob(f"slurm-image-{job.job_id}.*"))
    if result is not None:
        assert "Permission denied" not in result.stderr
        assert "could not remove" not in result.stderr


@pytest.mark.e2e
def test_a_successful_import_leaves_nothing_in_the_node_s_scratch(
    make_job: JobFactory, registry_images: dict[str, str], inspection_path: str
) -> None:
    job = make_job(
        operation="import_oci",
        role="client",
        source=registry_images["client"],
        environment={**HTTP, "ENROOT_SQUASH_OPTIONS": TEST_SQUASH_OPTIONS},
    )

    result = job.run(inspection_path=inspection_path)

    assert result.returncode == 0, result.stderr
    assert job.inspection_path_record()["path"] == inspection_path
    nothing_left(job, result)


@pytest.fixture
def shelved(image, world_readable_tmp: Path) -> Callable[[str], Path]:
    """A copy of a busybox image where an ordinary user's job may read it too."""
    shelf = world_readable_tmp / "shelf"
    shelf.mkdir(mode=0o755)

    def copy(name: str) -> Path:
        target = shelf / f"{name}.sqsh"
        target.write_bytes(image(name).read_bytes())
        return target

    return copy


def test_an_image_the_inspector_refuses_leaves_nothing_in_the_node_s_scratch(
    make_job: JobFactory, shelved: Callable[[str], Path], inspection_path: str
) -> None:
    source = shelved("fail-after-writing")
    job = make_job(operation="inspect_sqsh", role="client", source=str(source))

    result = job.run(inspection_path=inspection_path)

    assert result.returncode == 76, result.stderr
    nothing_left(job, result)


@pytest.fixture
def registry(registry_images: dict[str, str]) -> Iterator[LyingRegistry]:
    with lying_registry() as lying:
        yield lying


@pytest.mark.e2e
def test_a_refused_registry_answer_leaves_nothing_in_the_node_s_scratch(
    make_job: JobFactory,
    registry: LyingRegistry,
    registry_images: dict[str, str],
    inspection_path: str,
) -> None:
    pin = pinned(registry_images, "nopython")
    registry.answer(
        Answer(
            f"/v2/{NOPYTHON}/manifests/{pin}",
            registry.manifest(CLIENT, pinned(registry_images, "client")),
        )
    )
    job = make_job(
        operation="import_oci",
        role="client",
        source=f"{registry.address}/{NOPYTHON}:1@{pin}",
        environment=HTTP,
    )

    result = job.run(inspection_path=inspection_path)

    assert result.returncode == 79, result.stderr
    nothing_left(job, result)


WAITING = "waiting to be cancelled"


def test_a_job_cancelled_during_the_inspection_leaves_nothing_in_the_node_s_scratch(
    make_job: JobFactory, attack_image: AttackImage, inspection_path: str
) -> None:
    source = attack_image(f"echo '{WAITING}' >&2; sleep 120")
    job = make_job(operation="inspect_sqsh", role="serving", source=str(source))
    log = job.tmp / f"cancelled-{job.job_id}.err"

    with log.open("wb") as stderr:
        # as scancel does: TERM to every process of the job, the image's included
        process = subprocess.Popen(
            job.command(inspection_path),
            cwd=job.job_dir,
            env=job.environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 120
            while f"image: {WAITING}" not in log.read_text(errors="replace"):
                assert process.poll() is None, log.read_text(errors="replace")
                assert time.monotonic() < deadline, "the image never started"
                time.sleep(0.05)
            os.killpg(process.pid, signal.SIGTERM)
            status = process.wait(timeout=60)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    text = log.read_text(errors="replace")
    assert status == 143, text
    nothing_left(job, Result(status, "", text))


def test_a_scratch_that_cannot_be_removed_is_one_line_and_the_exit_code_stays(
    make_job: JobFactory, shelved: Callable[[str], Path], standin: Standin, inspection_path: str
) -> None:
    source = shelved("report")
    job = make_job(operation="inspect_sqsh", role="serving", source=str(source))
    install_failing_rm(standin.bin, f"slurm-image-{job.job_id}.")

    result = job.run(inspection_path=inspection_path)

    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "could not remove" in line]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"slurm-image: could not remove the job's scratch {job.scratch}/")
    assert " entries are left, the first " in lines[0]
    assert "Operation not permitted" not in result.stderr
