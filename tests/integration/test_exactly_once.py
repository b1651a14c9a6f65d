"""Exactly one job per marker when the answer to a submission is lost (fault injection).

- REST: a loopback proxy forwards the submit to slurmrestd and swallows the answer.
- sbatch: a stand-in ``sbatch`` runs the real one, then fails as if the answer timed out.
In the second scenario of each, the controller is also stopped at that moment and restarted
after an outage longer than a Slurm client waits for it (~9 s), so the adapter's marker look-ups
fail and are retried (never replaced by a blind resubmission) until one succeeds.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
from fault_proxy import DroppingProxy

from slurm_image.adapters.sbatch import SbatchSubmitter
from slurm_image.adapters.slurmrest import RestSubmitter
from slurm_image.domain.job import JobSpec
from slurm_image.submitters import RetryPolicy

pytestmark = pytest.mark.slurm

PATIENT = RetryPolicy(attempts=8, initial_wait_s=0.5, max_wait_s=2, jitter_s=0.2)
SCRIPT = b"#!/bin/bash -p\ntrue\n"


def _spec(workdir: Path) -> JobSpec:
    return JobSpec(
        name="slurm-image-client",
        partition="build",
        cpus_per_task=1,
        memory="100M",
        time_limit="0:02:00",
        working_directory=str(workdir),
        standard_output=str(workdir / "slurm-%j.out"),
        standard_error=str(workdir / "slurm-%j.err"),
        comment=f"slurm-image:img-{uuid.uuid4().hex}",
    )


class ControllerOutage:
    """Stops the controller when triggered and restarts it ``seconds`` later, in a thread."""

    def __init__(self, local_slurm, seconds: float = 12) -> None:  # type: ignore[no-untyped-def]
        self.local = local_slurm
        self.seconds = seconds
        self.thread: threading.Thread | None = None

    def trigger(self) -> None:
        self.local.run("controller", "stop")

        def restart() -> None:
            time.sleep(self.seconds)
            self.local.run("controller", "start")

        self.thread = threading.Thread(target=restart, daemon=True)
        self.thread.start()

    def finish(self) -> None:
        if self.thread is not None:
            self.thread.join(timeout=90)
        self.local.run("controller", "start")  # idempotent: a no-op when it runs


@pytest.mark.parametrize(
    "outage",
    [
        pytest.param(False, id="answer-lost"),
        pytest.param(True, id="answer-lost-controller-down", marks=pytest.mark.full_only),
    ],
)
def test_rest_submit_whose_answer_is_lost_makes_one_job(
    local_slurm, tmp_path: Path, outage: bool
) -> None:
    tmp_path.chmod(0o755)
    port = int(local_slurm.rest_url.rsplit(":", 1)[1])
    controller = ControllerOutage(local_slurm)
    spec = _spec(tmp_path)
    with DroppingProxy(port, on_drop=controller.trigger if outage else None) as proxy:
        proxy.drop_submits = 1
        submitter = RestSubmitter(
            url=proxy.url,
            user=local_slurm.rest_user,
            token_file=local_slurm.token_file,
            api_version=local_slurm.rest_versions[-1],
            retry_policy=PATIENT,
        )
        try:
            job_id = submitter.submit(SCRIPT, spec)
        finally:
            controller.finish()
        assert proxy.dropped == 1
    assert local_slurm.jobs_with_comment(spec.comment) == [job_id]


def _flaky_sbatch(tmp_path: Path, flag: Path, local_slurm) -> Path:  # type: ignore[no-untyped-def]
    """A bin directory whose sbatch submits for real, then reports a timed-out answer."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("squeue", "scancel"):
        (bin_dir / tool).symlink_to(local_slurm.client(tool))
    sbatch = local_slurm.client("sbatch")
    wrapper = bin_dir / "sbatch"
    wrapper.write_text(
        "#!/bin/bash\n"
        f"if [ ! -e {flag} ]; then\n"
        f'    {sbatch} "$@" >/dev/null || exit $?\n'
        f"    touch {flag}\n"
        '    echo "sbatch: error: Batch job submission failed:'
        ' Socket timed out on send/recv operation" >&2\n'
        "    exit 1\n"
        "fi\n"
        f'exec {sbatch} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


@pytest.mark.parametrize(
    "outage",
    [
        pytest.param(False, id="answer-lost"),
        pytest.param(True, id="answer-lost-controller-down", marks=pytest.mark.full_only),
    ],
)
def test_sbatch_submit_whose_answer_is_lost_makes_one_job(
    local_slurm, tmp_path: Path, outage: bool
) -> None:
    tmp_path.chmod(0o755)
    flag = tmp_path / "submitted-once"
    controller = ControllerOutage(local_slurm)
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if flag.exists():
                controller.trigger()
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    if outage:
        watcher.start()
    spec = _spec(tmp_path)
    submitter = SbatchSubmitter(
        sbatch=str(_flaky_sbatch(tmp_path, flag, local_slurm)),
        retry_policy=PATIENT,
        environ={"SLURM_CONF": local_slurm.slurm_conf},
    )
    try:
        job_id = submitter.submit(SCRIPT, spec)
    finally:
        stop.set()
        if outage:  # its stop may still be under way: the restart must be known to finish()
            watcher.join(timeout=60)
        controller.finish()
    assert flag.exists()
    assert local_slurm.jobs_with_comment(spec.comment) == [job_id]
