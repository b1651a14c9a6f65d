"""Prepare a lifecycle: validate the request, derive the plan, render the script, stage."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from slurm_image.application.errors import LifecycleExists, VerificationFailed, WrongWorkspace
from slurm_image.domain import paths
from slurm_image.domain.attempt import StagedRecord
from slurm_image.domain.canonical import sha256_hex
from slurm_image.domain.identity import FileIdentity
from slurm_image.domain.plan import Plan, derive_plan
from slurm_image.domain.profile import ProfileSelection, SiteProfile
from slurm_image.domain.request import Request
from slurm_image.domain.runtime import RuntimeFiles
from slurm_image.domain.script import render_script
from slurm_image.ports.clock import Clock
from slurm_image.ports.workspace import AlreadyExists, Workspace, WorkspaceError

log = logging.getLogger(__name__)

PLAN_MODE = 0o600
RECORD_MODE = 0o600
EXECUTABLE_MODE = 0o500


def new_lifecycle_id() -> str:
    return f"{paths.LIFECYCLE_ID_PREFIX}{uuid.uuid4().hex}"


@dataclass(frozen=True)
class PlannedLifecycle:
    """A plan and its script, before anything is staged."""

    plan: Plan
    script: str


class PlanLifecycle:
    """Derive a plan and its script. Creates nothing: ``--dry-run`` is exactly this."""

    def __init__(self, clock: Clock, runtime: RuntimeFiles) -> None:
        self._clock = clock
        self._runtime = runtime

    def __call__(
        self,
        request: Request,
        profile: SiteProfile,
        selection: ProfileSelection,
        lifecycle_id: str | None = None,
    ) -> PlannedLifecycle:
        plan = derive_plan(
            request,
            profile,
            selection,
            lifecycle_id=lifecycle_id or new_lifecycle_id(),
            created_at=self._clock.now(),
            runtime=self._runtime.digests(),
        )
        return PlannedLifecycle(plan=plan, script=render_script(plan))


@dataclass(frozen=True)
class PreparedLifecycle:
    """A staged attempt: its plan, its script, and the record of what was staged."""

    plan: Plan
    script: str
    staged: StagedRecord

    @property
    def lifecycle_id(self) -> str:
        return self.plan.lifecycle_id

    @property
    def job_directory(self) -> str:
        return self.plan.paths.job_dir


class Prepare:
    """Validate → plan → stage (design §4).

    Staging creates the attempt directory exclusively (a duplicate lifecycle id fails with
    ``LifecycleExists``), writes plan.json (0600), job.sbatch, inspect_image.py and enroot.rc
    (0500) and output/ (0700) inside it, each created exclusively and bound to the directory's
    identity, then records their digests and that identity in staged.json. A failure midway
    removes the attempt directory again (without following symlinks) and re-raises: nothing is
    left half-staged. Validation errors are raised before anything is created.
    """

    def __init__(self, clock: Clock, runtime: RuntimeFiles, workspace: Workspace) -> None:
        self._planner = PlanLifecycle(clock, runtime)
        self._runtime = runtime
        self._workspace = workspace

    def __call__(
        self,
        request: Request,
        profile: SiteProfile,
        selection: ProfileSelection,
        lifecycle_id: str | None = None,
    ) -> PreparedLifecycle:
        if profile.workspace_root != self._workspace.root:
            raise WrongWorkspace(
                "workspace_root", f"the workspace is bound to {self._workspace.root}"
            )
        planned = self._planner(request, profile, selection, lifecycle_id)
        return self._stage(planned)

    def _stage(self, planned: PlannedLifecycle) -> PreparedLifecycle:
        plan, workspace = planned.plan, self._workspace
        layout = paths.AttemptLayout(plan.profile.workspace_root, plan.lifecycle_id)
        files = (
            (plan.paths.plan, plan.canonical_bytes(), PLAN_MODE),
            (plan.paths.script, planned.script.encode(), EXECUTABLE_MODE),
            (plan.paths.inspector, self._runtime.inspector, EXECUTABLE_MODE),
            (plan.paths.rc, self._runtime.rc, EXECUTABLE_MODE),
        )
        try:
            identity = workspace.create_directory(plan.paths.job_dir, mode=0o700, parents=True)
        except AlreadyExists:
            raise LifecycleExists(
                "lifecycle_id", f"an attempt {plan.lifecycle_id} already exists in the workspace"
            ) from None
        try:
            digests: list[str] = []
            for path, data, mode in files:
                written = workspace.write_new(path, data, mode=mode, within=identity)
                if written.sha256 != sha256_hex(data) or written.mode != mode:
                    raise VerificationFailed(path, "was not staged as written")
                digests.append(written.sha256)
            workspace.create_directory(plan.paths.output_dir, mode=0o700, within=identity)
            plan_sha256, script_sha256, inspector_sha256, rc_sha256 = digests
            staged = StagedRecord(
                lifecycle_id=plan.lifecycle_id,
                job_dir=identity,
                plan_sha256=plan_sha256,
                script_sha256=script_sha256,
                inspector_sha256=inspector_sha256,
                rc_sha256=rc_sha256,
            )
            workspace.write_new(
                layout.staged_record, staged.canonical_bytes(), mode=RECORD_MODE, within=identity
            )
        except BaseException as failure:
            self._undo(plan.paths.job_dir, identity, failure)
            raise
        log.info(
            "staged %s in %s",
            plan.lifecycle_id,
            plan.paths.job_dir,
            extra={"lifecycle_id": plan.lifecycle_id},
        )
        return PreparedLifecycle(plan=plan, script=planned.script, staged=staged)

    def _undo(self, job_dir: str, identity: FileIdentity, failure: BaseException) -> None:
        try:
            self._workspace.remove_tree(job_dir, expected=identity)
        except WorkspaceError as error:
            failure.add_note(f"the partly staged attempt could not be removed: {error}")
