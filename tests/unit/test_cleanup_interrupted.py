"""An attempt whose removal was interrupted half way is finished by the next ``cleanup`` or
``gc``: its records go last, and every state they pass through is one both still recognise."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from publish_support import PublishLab
from slurm_image.application.errors import VerificationFailed
from slurm_image.application.maintain import Maintain
from slurm_image.domain.paths import AttemptLayout

A = "img-00000000000000000000000000000001"
RECORDS = AttemptLayout.RECORDS_REMOVED_LAST


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> PublishLab:
    return PublishLab(workspace_harness, profile_for, runtime_files)


def _maintain(lab: PublishLab) -> Maintain:
    return Maintain(lab.store, lab.locks, lab.observe, lab.clock, lock_timeout_s=5)


def _finished_with_a_tree(lab: PublishLab) -> str:
    plan = lab.finished(A)
    job_dir = plan.paths.job_dir
    lab.harness.deep_tree(f"{job_dir}/output", 300)
    lab.harness.wide_tree(f"{job_dir}/output", files=20, directories=5)
    return job_dir


def _finish(lab: PublishLab, how: str) -> None:
    if how == "cleanup":
        assert _maintain(lab).cleanup(A) == A
    else:
        lab.clock.advance(timedelta(days=1))
        removed = _maintain(lab).gc(older_than=timedelta(hours=1))
        assert ("attempt", AttemptLayout(lab.harness.root, A).job_dir) in [
            (r.kind, r.path) for r in removed
        ]


def test_every_record_of_a_finished_attempt_is_in_the_removal_order(lab: PublishLab) -> None:
    job_dir = lab.finished(A).paths.job_dir
    entries = lab.store.list_directory(job_dir)
    records = [name for name in entries if name.endswith((".json", ".claim"))]
    # chain.json is what the job wrote, like output/: no attempt is recognised by it
    assert sorted(records) == sorted([*RECORDS, "chain.json"])


@pytest.mark.parametrize("how", ["cleanup", "gc"])
@pytest.mark.parametrize("interrupted_at", ["output", *RECORDS])
def test_a_cleanup_interrupted_at_any_step_is_finished_later(
    lab: PublishLab, how: str, interrupted_at: str
) -> None:
    job_dir = _finished_with_a_tree(lab)
    with (
        lab.harness.failing_removal(lab.store, below=f"{job_dir}/{interrupted_at}") as failed,
        pytest.raises(VerificationFailed),
    ):
        _maintain(lab).cleanup(A)
    assert failed, "the removal was not interrupted"
    kept = RECORDS if interrupted_at == "output" else RECORDS[RECORDS.index(interrupted_at) :]
    gone = [name for name in RECORDS if name not in kept]
    assert [name for name in kept if lab.harness.exists(f"{job_dir}/{name}")] == list(kept)
    assert [name for name in gone if lab.harness.exists(f"{job_dir}/{name}")] == []
    _finish(lab, how)
    assert not lab.harness.exists(job_dir)
