"""Prepare stages an import's registry credentials, Submit verifies them, and the secret stays
out of plan.json and staged.json; an inspect never gets any (both workspaces)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from slurm_image.adapters.memory import FakeClock, FakeSubmitter, MemoryCredentialsFile
from slurm_image.application.credentials import remove_staged_credentials
from slurm_image.application.errors import VerificationFailed
from slurm_image.application.prepare import PlanLifecycle, Prepare
from slurm_image.application.submit import Submit
from slurm_image.domain.attempt import load_staged_record
from slurm_image.domain.canonical import sha256_hex
from slurm_image.domain.credentials import staged_credentials_path
from slurm_image.domain.errors import InvalidProfile
from slurm_image.domain.paths import AttemptLayout
from slurm_image.domain.request import make_request
from slurm_image.ports.credentials import CredentialsFileError

LIFECYCLE = "img-00000000000000000000000000000001"
SECRET = "canary-0123456789abcdef"
NETRC = (
    f"machine nvcr.io login other password nope\n"
    f"machine registry-1.docker.io login hubuser password {SECRET}\n"
).encode()
STAGED = f"machine registry-1.docker.io login hubuser password {SECRET}\n".encode()


@dataclass
class World:
    harness: Any
    reader: MemoryCredentialsFile
    prepare: Prepare
    submit: Submit
    scheduler: FakeSubmitter
    profile: Any
    selection: Any

    def stage(self, request: Any) -> Any:
        return self.prepare(request, self.profile, self.selection, LIFECYCLE)

    def credentials_path(self) -> str:
        return staged_credentials_path(self.harness.root, LIFECYCLE)


@pytest.fixture
def world(workspace_harness, profile_for, runtime_files) -> World:
    clock = FakeClock()
    scheduler = FakeSubmitter()
    reader = MemoryCredentialsFile(files={"/home/user/.netrc": (NETRC, 0o600, True)})
    profile, selection = profile_for(
        workspace_harness.root, enroot={"credentials_file": "~/.netrc"}
    )
    ws = workspace_harness.workspace
    return World(
        harness=workspace_harness,
        reader=reader,
        prepare=Prepare(clock, runtime_files, ws, reader),
        submit=Submit(ws, scheduler, clock),
        scheduler=scheduler,
        profile=profile,
        selection=selection,
    )


def _import(source: str = f"docker.io/library/alpine:3.19@sha256:{'a' * 64}") -> Any:
    return make_request("import_oci", name="alpine", role="client", source=source)


def test_only_the_registrys_entry_is_staged_0600_and_its_digest_recorded(world: World) -> None:
    prepared = world.stage(_import())
    h, path = world.harness, world.credentials_path()

    assert h.read(path) == STAGED
    assert h.mode(path) == 0o600
    assert h.mode(path.rsplit("/", 1)[0]) == 0o700
    layout = AttemptLayout(h.root, LIFECYCLE)
    record = load_staged_record(h.read(layout.staged_record))
    assert record.credentials_sha256 == sha256_hex(STAGED)
    assert prepared.plan.credentials_host == "registry-1.docker.io"
    for name in (layout.plan, layout.staged_record, prepared.plan.paths.script):
        assert SECRET.encode() not in h.read(name)
    assert SECRET not in repr(prepared)


def test_no_entry_for_the_registry_stages_nothing_and_plans_anonymously(world: World) -> None:
    prepared = world.stage(_import(f"ghcr.io/team/app:1@sha256:{'b' * 64}"))
    assert prepared.plan.credentials_host is None
    assert not world.harness.exists(world.credentials_path())
    assert prepared.staged.credentials_sha256 is None


def test_an_inspect_never_gets_credentials(world: World) -> None:
    source = world.harness.root.rsplit("/", 1)[0] + "/x.sqsh"
    world.harness.write(source, b"hsqs")
    request = make_request("inspect_sqsh", name="x", role="client", source=source)
    prepared = world.stage(request)
    assert prepared.plan.credentials_host is None
    assert not world.harness.exists(world.credentials_path())


def test_submit_verifies_the_staged_credentials(world: World) -> None:
    world.stage(_import())
    submission = world.submit.staged(LIFECYCLE)
    assert submission.job_id


@pytest.mark.parametrize("how", ["changed", "removed", "mode"])
def test_submit_refuses_tampered_credentials_and_submits_nothing(world: World, how: str) -> None:
    world.stage(_import())
    h, path = world.harness, world.credentials_path()
    if how == "changed":
        h.remove(path)
        h.write(path, STAGED.replace(b"hubuser", b"intruder"))
        h.chmod(path, 0o600)
    elif how == "removed":
        h.remove(path)
    else:
        h.chmod(path, 0o644)

    with pytest.raises(VerificationFailed):
        world.submit.staged(LIFECYCLE)
    assert not world.scheduler.jobs


@pytest.mark.parametrize(
    ("files", "error"),
    [
        ({"/home/user/.netrc": (NETRC, 0o644, True)}, CredentialsFileError),
        ({"/home/user/.netrc": (NETRC, 0o600, False)}, CredentialsFileError),
        ({}, CredentialsFileError),
        ({"/home/user/.netrc": (b"machine registry-1.docker.io login u\n", 0o600, True)},
         InvalidProfile),
    ],
)  # fmt: skip
def test_an_unusable_credentials_file_is_refused_before_anything_is_created(
    world: World, files: dict[str, Any], error: type[Exception]
) -> None:
    world.reader.files = files
    with pytest.raises(error):
        world.stage(_import())
    assert not world.harness.exists(AttemptLayout(world.harness.root, LIFECYCLE).job_dir)


def test_a_dry_run_reads_the_entry_but_writes_nothing(world: World, runtime_files) -> None:
    planned = PlanLifecycle(FakeClock(), runtime_files, world.reader)(
        _import(), world.profile, world.selection, LIFECYCLE
    )
    assert planned.plan.credentials_host == "registry-1.docker.io"
    assert SECRET not in planned.plan.canonical_bytes().decode() + planned.script
    assert not world.harness.exists(AttemptLayout(world.harness.root, LIFECYCLE).job_dir)


def test_cleanup_and_gc_remove_the_staged_credentials_with_the_helper(world: World) -> None:
    world.stage(_import())
    ws = world.harness.workspace
    assert remove_staged_credentials(ws, LIFECYCLE) is True
    assert not world.harness.exists(world.credentials_path())
    assert remove_staged_credentials(ws, LIFECYCLE) is False  # nothing left: not an error


def test_the_helper_answers_false_for_an_attempt_without_credentials(world: World) -> None:
    world.stage(_import(f"ghcr.io/team/app:1@sha256:{'b' * 64}"))
    assert remove_staged_credentials(world.harness.workspace, LIFECYCLE) is False
