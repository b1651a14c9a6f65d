"""The Workspace contract (ports.workspace), asserted identically for every adapter."""

from __future__ import annotations

import hashlib
import os
import resource
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from slurm_image.domain.errors import InvalidPath
from slurm_image.domain.paths import AttemptLayout
from slurm_image.ports.workspace import (
    AccessDenied,
    AlreadyExists,
    IdentityChanged,
    NotFound,
    NotRegularFile,
    TooLarge,
    UnsafePath,
    Workspace,
    WorkspaceError,
)

LIFECYCLE = "img-0123456789abcdef0123456789abcdef"


@pytest.fixture(autouse=True)
def never_blocks() -> Iterator[None]:
    """A FIFO opened for reading would block forever: fail the test instead of hanging."""

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError("the workspace blocked")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(10)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def layout(workspace_harness) -> AttemptLayout:
    return AttemptLayout(workspace_harness.root, LIFECYCLE)


@pytest.fixture
def ws(workspace_harness) -> Workspace:
    return workspace_harness.workspace


def test_every_adapter_is_a_workspace(ws) -> None:
    assert isinstance(ws, Workspace)


# -- directories -------------------------------------------------------------------------


def test_create_directory_makes_the_layout_0700_and_returns_its_identity(
    workspace_harness, ws, layout
) -> None:
    identity = ws.create_directory(layout.job_dir, parents=True)
    for path in (layout.images, layout.tmp, layout.jobs, layout.job_dir):
        assert workspace_harness.kind_of(path) == "directory"
        assert workspace_harness.mode(path) == 0o700
    assert ws.directory_identity(layout.job_dir) == identity
    assert ws.directory_identity(layout.jobs) != identity


def test_create_directory_sets_exactly_the_mode_asked(workspace_harness, ws, layout) -> None:
    ws.create_directory(layout.job_dir, parents=True)
    ws.create_directory(layout.in_job("output"), mode=0o750)
    assert workspace_harness.mode(layout.in_job("output")) == 0o750


def test_create_directory_is_exclusive(ws, layout) -> None:
    ws.create_directory(layout.job_dir, parents=True)
    with pytest.raises(AlreadyExists):
        ws.create_directory(layout.job_dir)


def test_create_directory_without_parents_needs_them(ws, layout) -> None:
    with pytest.raises(NotFound):
        ws.create_directory(layout.job_dir)


@pytest.mark.parametrize("plant", ["dangling symlink", "symlink to a directory", "fifo", "file"])
def test_create_directory_refuses_anything_planted_at_its_path(
    workspace_harness, ws, layout, plant
) -> None:
    workspace_harness.makedirs(layout.jobs)
    elsewhere = f"{workspace_harness.root}/elsewhere"
    workspace_harness.mkdir(elsewhere)
    if plant == "dangling symlink":
        workspace_harness.symlink(f"{elsewhere}/missing", layout.job_dir)
    elif plant == "symlink to a directory":
        workspace_harness.symlink(elsewhere, layout.job_dir)
    elif plant == "fifo":
        workspace_harness.mkfifo(layout.job_dir)
    else:
        workspace_harness.write(layout.job_dir, b"")
    with pytest.raises(AlreadyExists):
        ws.create_directory(layout.job_dir)
    assert not workspace_harness.exists(f"{elsewhere}/missing")


def refusal(component: str) -> type[Exception]:
    """``images/``, the root's own entry, that is not the user's is a set-up problem of the
    workspace (``InvalidPath`` of ``workspace_root``); below it, an unsafe directory."""
    return InvalidPath if component == "images" else UnsafePath


@pytest.mark.parametrize("component", ["images", "tmp", "jobs"])
def test_a_symlinked_layout_directory_is_refused_and_nothing_is_written_through_it(
    workspace_harness, ws, layout, component
) -> None:
    target = f"{workspace_harness.root}/decoy"
    workspace_harness.mkdir(target)
    chain = [layout.images, layout.tmp, layout.jobs]
    planted = getattr(layout, component)
    for path in chain[: chain.index(planted)]:
        workspace_harness.mkdir(path)
    workspace_harness.symlink(target, planted)
    before = workspace_harness.listing()
    with pytest.raises(refusal(component), match="symlink"):
        ws.create_directory(layout.job_dir, parents=True)
    with pytest.raises(refusal(component)):
        ws.write_new(f"{planted}/file", b"x", mode=0o600)
    assert workspace_harness.listing() == before


@pytest.mark.parametrize("component", ["images", "tmp", "jobs"])
def test_a_foreign_owned_layout_directory_is_refused(
    workspace_harness, ws, layout, component
) -> None:
    workspace_harness.makedirs(layout.jobs)
    workspace_harness.chown(getattr(layout, component), 4242)
    before = workspace_harness.listing()
    with pytest.raises(refusal(component), match="owned by uid 4242"):
        ws.create_directory(layout.job_dir, parents=True)
    assert workspace_harness.listing() == before


@pytest.mark.parametrize("plant", ["file", "fifo"])
def test_a_layout_entry_that_is_not_a_directory_is_refused(
    workspace_harness, ws, layout, plant
) -> None:
    if plant == "file":
        workspace_harness.write(layout.images, b"")
    else:
        workspace_harness.mkfifo(layout.images)
    with pytest.raises(InvalidPath, match="not a directory") as refused:
        ws.create_directory(layout.job_dir, parents=True)
    assert refused.value.field == "workspace_root"


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "{root}", "{root}/../x", "{root}/images/./x", "{root}//images"]
)
def test_paths_outside_the_root_are_refused(workspace_harness, ws, path) -> None:
    with pytest.raises(UnsafePath):
        ws.write_new(path.format(root=workspace_harness.root), b"x", mode=0o600)


# -- files -------------------------------------------------------------------------------


@pytest.fixture
def job(ws, layout) -> str:
    ws.create_directory(layout.job_dir, parents=True)
    return layout.job_dir


@pytest.mark.parametrize("mode", [0o600, 0o500, 0o400])
def test_write_new_sets_the_mode_and_reports_the_digest(workspace_harness, ws, job, mode) -> None:
    data = b"#!/bin/bash\necho hi\n"
    written = ws.write_new(f"{job}/job.sbatch", data, mode=mode)
    assert workspace_harness.read(f"{job}/job.sbatch") == data
    assert workspace_harness.mode(f"{job}/job.sbatch") == mode
    assert (written.mode, written.size) == (mode, len(data))
    assert written.sha256 == hashlib.sha256(data).hexdigest()


def test_write_new_is_exclusive_and_keeps_the_first_content(workspace_harness, ws, job) -> None:
    ws.write_new(f"{job}/plan.json", b"first", mode=0o600)
    with pytest.raises(AlreadyExists):
        ws.write_new(f"{job}/plan.json", b"second", mode=0o600)
    assert workspace_harness.read(f"{job}/plan.json") == b"first"


@pytest.mark.parametrize("plant", ["dangling symlink", "symlink to a file", "fifo"])
def test_write_new_never_writes_through_what_was_planted(workspace_harness, ws, job, plant) -> None:
    victim = f"{workspace_harness.root}/victim"
    if plant == "dangling symlink":
        workspace_harness.symlink(victim, f"{job}/job.sbatch")
    elif plant == "symlink to a file":
        workspace_harness.write(victim, b"precious")
        workspace_harness.symlink(victim, f"{job}/job.sbatch")
    else:
        workspace_harness.mkfifo(f"{job}/job.sbatch")
    with pytest.raises(AlreadyExists):
        ws.write_new(f"{job}/job.sbatch", b"evil", mode=0o500)
    if plant == "symlink to a file":
        assert workspace_harness.read(victim) == b"precious"
    else:
        assert not workspace_harness.exists(victim)


def test_write_new_within_a_replaced_directory_is_refused(workspace_harness, ws, job) -> None:
    identity = ws.directory_identity(job)
    workspace_harness.rename(job, f"{job}.old")
    workspace_harness.mkdir(job)
    with pytest.raises(IdentityChanged):
        ws.write_new(f"{job}/plan.json", b"x", mode=0o600, within=identity)
    with pytest.raises(IdentityChanged):
        ws.create_directory(f"{job}/output", within=identity)
    assert workspace_harness.listing().count(f"{job}/plan.json") == 0


def test_replace_file_swaps_content_atomically_and_leaves_no_temporary(
    workspace_harness, ws, job
) -> None:
    ws.replace_file(f"{job}/submission.json", b"one", mode=0o600)
    written = ws.replace_file(f"{job}/submission.json", b"two", mode=0o600)
    assert workspace_harness.read(f"{job}/submission.json") == b"two"
    assert written.sha256 == hashlib.sha256(b"two").hexdigest()
    assert workspace_harness.mode(f"{job}/submission.json") == 0o600
    assert ws.list_directory(job) == ["submission.json"]


def test_replace_file_replaces_a_symlink_not_its_target(workspace_harness, ws, job) -> None:
    victim = f"{workspace_harness.root}/victim"
    workspace_harness.write(victim, b"precious")
    workspace_harness.symlink(victim, f"{job}/submission.json")
    ws.replace_file(f"{job}/submission.json", b"record", mode=0o600)
    assert workspace_harness.kind_of(f"{job}/submission.json") == "file"
    assert workspace_harness.read(victim) == b"precious"


# -- verified reads ----------------------------------------------------------------------


def test_read_verified_returns_bytes_and_identity(ws, job) -> None:
    written = ws.write_new(f"{job}/plan.json", b"{}\n", mode=0o600)
    read = ws.read_verified(f"{job}/plan.json", max_bytes=3)
    assert (read.data, read.identity, read.mode) == (b"{}\n", written.identity, 0o600)


def test_read_verified_refuses_a_file_over_its_bound(ws, job) -> None:
    ws.write_new(f"{job}/plan.json", b"1234", mode=0o600)
    with pytest.raises(TooLarge):
        ws.read_verified(f"{job}/plan.json", max_bytes=3)


@pytest.mark.parametrize("plant", ["symlink to a copy", "dangling symlink", "fifo", "directory"])
def test_read_verified_refuses_what_is_not_a_regular_file(
    workspace_harness, ws, job, plant
) -> None:
    path = f"{job}/job.sbatch"
    copy = f"{job}/copy"
    if plant == "symlink to a copy":
        workspace_harness.write(copy, b"script")
        workspace_harness.symlink(copy, path)
    elif plant == "dangling symlink":
        workspace_harness.symlink(copy, path)
    elif plant == "fifo":
        workspace_harness.mkfifo(path)  # no writer: opening it for reading would block
    else:
        workspace_harness.mkdir(path)
    with pytest.raises(NotRegularFile):
        ws.read_verified(path, max_bytes=1024)


def test_read_verified_refuses_a_foreign_owned_file(workspace_harness, ws, job) -> None:
    ws.write_new(f"{job}/plan.json", b"{}", mode=0o600)
    workspace_harness.chown(f"{job}/plan.json", 4242)
    with pytest.raises(UnsafePath, match="owned by uid 4242"):
        ws.read_verified(f"{job}/plan.json", max_bytes=1024)


def test_read_verified_of_a_missing_file_is_not_found(ws, job) -> None:
    with pytest.raises(NotFound):
        ws.read_verified(f"{job}/plan.json", max_bytes=1024)


def test_read_verified_within_a_replaced_directory_is_refused(workspace_harness, ws, job) -> None:
    ws.write_new(f"{job}/plan.json", b"{}", mode=0o600)
    identity = ws.directory_identity(job)
    workspace_harness.rename(job, f"{job}.old")
    workspace_harness.copy_tree(f"{job}.old", job)
    assert ws.directory_identity(job) != identity
    with pytest.raises(IdentityChanged):
        ws.read_verified(f"{job}/plan.json", max_bytes=1024, within=identity)


# -- listing, existence, removal ---------------------------------------------------------


def test_exists_sees_a_dangling_symlink_and_not_a_missing_path(workspace_harness, ws, job) -> None:
    assert not ws.exists(f"{job}/submission.json")
    workspace_harness.symlink("/nonexistent", f"{job}/submission.json")
    assert ws.exists(f"{job}/submission.json")
    assert not ws.exists(f"{job}/missing/deeper")


def test_list_directory_is_sorted(ws, job) -> None:
    for name in ("b", "a", "c"):
        ws.write_new(f"{job}/{name}", b"", mode=0o600)
    assert list(ws.list_directory(job)) == ["a", "b", "c"]


def test_remove_tree_removes_everything_without_following_symlinks(
    workspace_harness, ws, job
) -> None:
    outside = f"{workspace_harness.root}/outside"
    workspace_harness.mkdir(outside)
    workspace_harness.write(f"{outside}/keep", b"keep")
    ws.write_new(f"{job}/job.sbatch", b"x", mode=0o500)
    ws.create_directory(f"{job}/output")
    ws.write_new(f"{job}/output/inspection.json", b"{}", mode=0o400)
    workspace_harness.symlink(outside, f"{job}/output/link")
    workspace_harness.mkfifo(f"{job}/fifo")
    ws.remove_tree(job, expected=ws.directory_identity(job))
    assert not workspace_harness.exists(job)
    assert workspace_harness.read(f"{outside}/keep") == b"keep"


def test_remove_tree_of_another_directory_removes_nothing(workspace_harness, ws, job) -> None:
    identity = ws.directory_identity(job)
    workspace_harness.rename(job, f"{job}.old")
    workspace_harness.mkdir(job)
    ws.write_new(f"{job}/someone-elses", b"", mode=0o600)
    with pytest.raises(IdentityChanged):
        ws.remove_tree(job, expected=identity)
    assert workspace_harness.exists(f"{job}/someone-elses")


def test_remove_file_removes_a_symlink_not_its_target(workspace_harness, ws, job) -> None:
    victim = f"{workspace_harness.root}/victim"
    workspace_harness.write(victim, b"precious")
    workspace_harness.symlink(victim, f"{job}/claim")
    ws.remove_file(f"{job}/claim")
    assert not workspace_harness.exists(f"{job}/claim")
    assert workspace_harness.read(victim) == b"precious"
    with pytest.raises(NotFound):
        ws.remove_file(f"{job}/claim")


# -- a read-only workspace ---------------------------------------------------------------


def _try_to_write(workspace: Workspace) -> list[str]:
    layout = AttemptLayout(workspace.root, LIFECYCLE)
    outcomes = []
    for attempt in (
        lambda: workspace.create_directory(layout.job_dir, parents=True),
        lambda: workspace.write_new(f"{layout.jobs}/file", b"x", mode=0o600),
        lambda: workspace.replace_file(f"{layout.jobs}/record", b"x"),
    ):
        try:
            attempt()
            outcomes.append("written")
        except WorkspaceError as error:
            outcomes.append(type(error).__name__)
    return outcomes


@pytest.mark.parametrize("scenario", ["mount", "permissions"])
def test_a_read_only_workspace_refuses_every_write_and_creates_nothing(
    workspace_harness, layout, scenario
) -> None:
    workspace_harness.makedirs(layout.jobs)
    before = workspace_harness.listing()
    outcomes = workspace_harness.read_only(scenario, _try_to_write)
    assert outcomes == [AccessDenied.__name__] * 3
    assert workspace_harness.listing() == before


# -- removing any tree, in bounded descriptors -------------------------------------------


@contextmanager
def descriptors_at_most(extra: int) -> Iterator[None]:
    """Inside, the process can open only ``extra`` descriptors beyond those open now (the soft
    RLIMIT_NOFILE just above them); afterwards the same descriptors are open as before."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = _open_descriptors()
    free = [n for n in range(soft) if n not in before][:extra]
    resource.setrlimit(resource.RLIMIT_NOFILE, (free[-1] + 1, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    # Another thread of this worker (an earlier test's server ending) may hold a descriptor
    # for a moment: it closes; one the code under test leaked stays.
    deadline = time.monotonic() + 5
    while not _open_descriptors() <= before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _open_descriptors() <= before


def _open_descriptors() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


DESCRIPTORS = 8


def test_remove_tree_removes_a_tree_5000_directories_deep_in_bounded_descriptors(
    workspace_harness, ws, job
) -> None:
    ws.create_directory(f"{job}/output")
    workspace_harness.deep_tree(f"{job}/output", 5000)
    with descriptors_at_most(DESCRIPTORS):
        ws.remove_tree(job, expected=ws.directory_identity(job))
    assert not workspace_harness.exists(job)


def test_remove_tree_removes_a_wide_tree_in_bounded_descriptors(workspace_harness, ws, job) -> None:
    ws.create_directory(f"{job}/output")
    workspace_harness.wide_tree(f"{job}/output", files=10000, directories=1000)
    with descriptors_at_most(DESCRIPTORS):
        ws.remove_tree(job, expected=ws.directory_identity(job))
    assert not workspace_harness.exists(job)


@pytest.mark.parametrize("mode", [0o000, 0o100, 0o500])
def test_remove_tree_removes_directories_the_image_locked(workspace_harness, ws, job, mode) -> None:
    ws.create_directory(f"{job}/output")
    workspace_harness.mkdir(f"{job}/output/locked")
    workspace_harness.write(f"{job}/output/locked/file", b"x")
    workspace_harness.chmod(f"{job}/output/locked", mode)
    ws.remove_tree(job, expected=ws.directory_identity(job))
    assert not workspace_harness.exists(job)


def test_remove_tree_removes_the_entries_named_last_after_everything_else(
    workspace_harness, ws, job
) -> None:
    for name in ("plan.json", "submission.json", "job.sbatch"):
        ws.write_new(f"{job}/{name}", b"{}", mode=0o600)
    ws.create_directory(f"{job}/output")
    workspace_harness.deep_tree(f"{job}/output", 50)
    identity = ws.directory_identity(job)
    with (
        workspace_harness.failing_removal(ws, below=f"{job}/output") as failed,
        pytest.raises(WorkspaceError),
    ):
        ws.remove_tree(job, expected=identity, last=["plan.json", "submission.json"])
    assert failed and failed[0].startswith(f"{job}/output/")
    assert workspace_harness.exists(f"{job}/plan.json")
    assert workspace_harness.exists(f"{job}/submission.json")
    with (
        workspace_harness.failing_removal(ws, below=f"{job}/submission.json") as failed,
        pytest.raises(WorkspaceError),
    ):
        ws.remove_tree(job, expected=identity, last=["plan.json", "submission.json"])
    assert not workspace_harness.exists(f"{job}/output")
    assert not workspace_harness.exists(f"{job}/plan.json")
    assert workspace_harness.exists(f"{job}/submission.json")
    ws.remove_tree(job, expected=identity, last=["plan.json", "submission.json"])
    assert not workspace_harness.exists(job)
