"""Submit a staged lifecycle: verify what is on disk, then hand the verified bytes over
(docs/design.md, "Submission and exactly-once").

Verification, in order, before the scheduler hears anything:
1. the attempt directory is the one staged (its identity), and not submitted before;
2. plan.json, read through one descriptor (no symlink, regular file, size bound) from that
   directory, has the staged digest and loads as a valid, canonical plan of this attempt;
3. job.sbatch, read the same way, has the staged digest *and* equals the script re-rendered
   from the plan — so an edit that also rebinds the digest in staged.json is still caught;
4. inspect_image.py and enroot.rc have the digests the plan and the record name, and the
   registry credentials an import stages (``enroot/config/.credentials``) are there, 0600,
   with the digest staged.json records exactly when the plan names a credentials host;
5. the attempt directory holds nothing that was not staged, and output/ is empty;
6. the attempt directory still has its identity.
Then the bytes that were verified — never a path — go to the submitter, and the submission is
recorded atomically in submission.json.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slurm_image.application.errors import (
    AlreadySubmitted,
    SubmissionInDoubt,
    VerificationFailed,
)
from slurm_image.application.records import attempt_directory
from slurm_image.domain import paths
from slurm_image.domain.attempt import (
    ATTEMPT_RECORD_MODE,
    RECORD_MAX_BYTES,
    StagedRecord,
    SubmissionRecord,
    load_staged_record,
    load_submission_record,
)
from slurm_image.domain.canonical import sha256_hex
from slurm_image.domain.credentials import (
    CREDENTIALS_MAX_BYTES,
    CREDENTIALS_MODE,
    CREDENTIALS_NAME,
)
from slurm_image.domain.errors import DomainError
from slurm_image.domain.identity import FileIdentity
from slurm_image.domain.plan import PLAN_MAX_BYTES, Plan, format_time, load_plan
from slurm_image.domain.script import render_script
from slurm_image.ports.clock import Clock
from slurm_image.ports.submitter import BatchSubmitter, SchedulerAuthError, SchedulerRejected
from slurm_image.ports.workspace import AlreadyExists, Workspace, WorkspaceError

if TYPE_CHECKING:
    from slurm_image.application.lifecycle_rights import LifecycleRights
    from slurm_image.application.prepare import PreparedLifecycle

log = logging.getLogger(__name__)

SCRIPT_MAX_BYTES = 1 << 20
RUNTIME_MAX_BYTES = 4 << 20


@dataclass(frozen=True)
class Submission:
    """An attempt the scheduler accepted."""

    lifecycle_id: str
    job_id: str
    record: SubmissionRecord


@dataclass(frozen=True)
class _Verified:
    plan: Plan
    plan_sha256: str
    script: bytes
    script_sha256: str


class Submit:
    """Verify a staged attempt and submit its script (see the module docstring).

    Raises ``VerificationFailed`` (the scheduler receives nothing), ``AlreadySubmitted``,
    ``UnknownLifecycle``, and the submitter's own errors; with ``rights``, ``Forbidden`` for a
    lifecycle staged earlier that is not the requester's (``staged``).
    """

    def __init__(
        self,
        workspace: Workspace,
        submitter: BatchSubmitter,
        clock: Clock,
        *,
        rights: LifecycleRights | None = None,
    ) -> None:
        self._workspace = workspace
        self._submitter = submitter
        self._clock = clock
        self._rights = rights

    def __call__(self, prepared: PreparedLifecycle) -> Submission:
        """Submit an attempt prepared in this process, against the record it holds."""
        layout = paths.AttemptLayout(self._workspace.root, prepared.lifecycle_id)
        return self._submit(layout, prepared.staged, expected=prepared.plan)

    def staged(self, lifecycle_id: str) -> Submission:
        """Submit an attempt staged earlier (``--no-submit``), found by its id alone: only its
        owner, its group and the admins may (``rights``)."""
        if self._rights is not None:
            self._rights.require_owner(lifecycle_id, what=f"submitting {lifecycle_id}")
        layout, identity = attempt_directory(self._workspace, lifecycle_id)
        data = self._read(layout.staged_record, RECORD_MAX_BYTES, identity)
        try:
            record = load_staged_record(data)
        except DomainError as error:
            raise VerificationFailed(
                field=layout.staged_record, rule=f"{error.field}: {error.rule}"
            ) from None
        if record.lifecycle_id != lifecycle_id:
            raise VerificationFailed(field=layout.staged_record, rule="names another lifecycle id")
        if not record.job_dir.same_object_elsewhere(identity):
            raise VerificationFailed(
                field=layout.job_dir,
                rule="is not the directory that was staged (replaced after prepare)",
            )
        if record.job_dir != identity:
            # Staged on another login node: from here on, bind every read to this host's view.
            log.info(
                "attempt %s was staged on another host (device %s, here %s)",
                lifecycle_id,
                record.job_dir.device,
                identity.device,
                extra={"lifecycle_id": lifecycle_id},
            )
            record = record.model_copy(update={"job_dir": identity})
        return self._submit(layout, record, expected=None)

    # -- steps ---------------------------------------------------------------------------

    def _submit(
        self, layout: paths.AttemptLayout, staged: StagedRecord, expected: Plan | None
    ) -> Submission:
        self._refuse_if_submitted(layout, staged.job_dir)
        verified = self._verify(layout, staged, expected)
        plan = verified.plan
        if self._claim(layout, staged.job_dir, plan):
            try:
                job_id = self._submitter.submit(verified.script, plan.job_spec())
            except (SchedulerRejected, SchedulerAuthError):
                # Refused for certain: nothing runs, so a later submit may try again.
                self._workspace.remove_file(layout.submission_claim, within=staged.job_dir)
                raise
        else:
            found = self._submitter.find_by_marker(plan.marker)
            if found is None:
                raise SubmissionInDoubt(
                    field="lifecycle_id",
                    rule=f"an earlier submit of {plan.lifecycle_id} started and no job carries "
                    f"{plan.marker}; if none is queued or running, remove "
                    f"{layout.submission_claim} and submit again",
                )
            job_id = found
        record = SubmissionRecord(
            lifecycle_id=plan.lifecycle_id,
            job_id=job_id,
            submitter=self._submitter.name,
            marker=plan.marker,
            submitted_at=format_time(self._clock.now()),
            plan_sha256=verified.plan_sha256,
            script_sha256=verified.script_sha256,
        )
        self._workspace.replace_file(
            layout.submission_record,
            record.canonical_bytes(),
            mode=ATTEMPT_RECORD_MODE,
            within=staged.job_dir,
        )
        log.info(
            "submitted %s as job %s via %s",
            plan.lifecycle_id,
            job_id,
            self._submitter.name,
            extra={"lifecycle_id": plan.lifecycle_id},
        )
        return Submission(lifecycle_id=plan.lifecycle_id, job_id=job_id, record=record)

    def _refuse_if_submitted(self, layout: paths.AttemptLayout, within: FileIdentity) -> None:
        try:
            submitted = self._workspace.exists(layout.submission_record)
        except WorkspaceError as error:
            raise VerificationFailed(field=error.field, rule=error.rule) from None
        if not submitted:
            return
        job = "an unreadable record"
        try:
            data = self._workspace.read_verified(
                layout.submission_record, max_bytes=RECORD_MAX_BYTES, within=within
            ).data
            job = f"job {load_submission_record(data).job_id}"
        except (WorkspaceError, DomainError):
            pass
        raise AlreadySubmitted(
            field="lifecycle_id", rule=f"{layout.lifecycle_id} was submitted already ({job})"
        )

    def _verify(
        self, layout: paths.AttemptLayout, staged: StagedRecord, expected: Plan | None
    ) -> _Verified:
        within = staged.job_dir
        plan_bytes = self._read(layout.plan, PLAN_MAX_BYTES, within)
        plan_sha256 = sha256_hex(plan_bytes)
        if plan_sha256 != staged.plan_sha256:
            raise VerificationFailed(
                field=layout.plan, rule="does not match the digest recorded at staging"
            )
        try:
            plan = load_plan(plan_bytes)
        except DomainError as error:
            raise VerificationFailed(
                field=layout.plan, rule=f"{error.field}: {error.rule}"
            ) from None
        if plan.lifecycle_id != layout.lifecycle_id or plan.paths.job_dir != layout.job_dir:
            raise VerificationFailed(field=layout.plan, rule="belongs to another attempt")
        if expected is not None and plan != expected:
            raise VerificationFailed(field=layout.plan, rule="differs from the prepared plan")

        script = self._read(plan.paths.script, SCRIPT_MAX_BYTES, within)
        script_sha256 = sha256_hex(script)
        if script_sha256 != staged.script_sha256:
            raise VerificationFailed(
                field=plan.paths.script, rule="does not match the digest recorded at staging"
            )
        if script_sha256 != sha256_hex(render_script(plan).encode()):
            raise VerificationFailed(
                field=plan.paths.script, rule="differs from the script rendered from the plan"
            )

        for path, planned, recorded in (
            (plan.paths.inspector, plan.runtime.inspector_sha256, staged.inspector_sha256),
            (plan.paths.rc, plan.runtime.rc_sha256, staged.rc_sha256),
        ):
            digest = sha256_hex(self._read(path, RUNTIME_MAX_BYTES, within))
            if digest != planned or digest != recorded:
                raise VerificationFailed(field=path, rule="does not match the digest in the plan")
        self._verify_credentials(plan, staged)

        self._refuse_foreign_entries(layout, plan)

        try:
            current = self._workspace.directory_identity(layout.job_dir)
        except WorkspaceError as error:
            raise VerificationFailed(field=error.field, rule=error.rule) from None
        if current != within:
            raise VerificationFailed(
                field=layout.job_dir,
                rule="is not the directory that was staged (replaced after prepare)",
            )
        return _Verified(plan, plan_sha256, script, script_sha256)

    def _refuse_foreign_entries(self, layout: paths.AttemptLayout, plan: Plan) -> None:
        """Nothing in the attempt but what staging put there: the job would trust it (a
        ``slurm-<id>.err`` symlink is written through by Slurm, an ``enroot`` directory read by
        Enroot), and the output directory empty and a real directory of ours."""
        try:
            entries = self._workspace.list_directory(layout.job_dir)
            foreign = sorted(set(entries) - layout.STAGED_ENTRIES - self._credentials_entry(plan))
            if foreign:
                raise VerificationFailed(
                    field=layout.job_dir,
                    rule=f"holds entries that were not staged: {', '.join(foreign)}",
                )
            if self._workspace.list_directory(plan.paths.output_dir):
                raise VerificationFailed(field=plan.paths.output_dir, rule="is not empty")
        except WorkspaceError as error:
            raise VerificationFailed(field=error.field, rule=error.rule) from None

    def _credentials_entry(self, plan: Plan) -> set[str]:
        """``enroot``, when staging put the registry credentials there and nothing else."""
        if plan.credentials_host is None:
            return set()
        config = plan.paths.enroot_config
        enroot = config.rsplit("/", 1)[0]
        for directory, expected in ((enroot, ["config"]), (config, [CREDENTIALS_NAME])):
            found = sorted(self._workspace.list_directory(directory))
            if found != expected:
                raise VerificationFailed(
                    field=directory,
                    rule=f"holds {', '.join(found) or 'nothing'}; staging put {expected[0]}",
                )
        return {enroot.rsplit("/", 1)[1]}

    def _verify_credentials(self, plan: Plan, staged: StagedRecord) -> None:
        path = f"{plan.paths.enroot_config}/{CREDENTIALS_NAME}"
        if (plan.credentials_host is None) != (staged.credentials_sha256 is None):
            raise VerificationFailed(
                field=path,
                rule="plan.json and staged.json disagree on whether credentials were staged",
            )
        if staged.credentials_sha256 is None:
            return
        try:
            # below the attempt directory: walked from the root without following symlinks
            read = self._workspace.read_verified(path, max_bytes=CREDENTIALS_MAX_BYTES)
        except WorkspaceError as error:
            raise VerificationFailed(field=error.field, rule=error.rule) from None
        if read.mode != CREDENTIALS_MODE:
            raise VerificationFailed(field=path, rule=f"must have mode {CREDENTIALS_MODE:04o}")
        if sha256_hex(read.data) != staged.credentials_sha256:
            raise VerificationFailed(
                field=path, rule="does not match the digest recorded at staging"
            )

    def _claim(self, layout: paths.AttemptLayout, within: FileIdentity, plan: Plan) -> bool:
        """Mark the submission as started. False when an earlier one started: its outcome is
        unknown, so the caller asks the scheduler for the attempt's marker instead."""
        try:
            self._workspace.write_new(
                layout.submission_claim,
                f"{plan.marker}\n".encode(),
                mode=ATTEMPT_RECORD_MODE,
                within=within,
            )
        except AlreadyExists:
            return False
        return True

    def _read(self, path: str, max_bytes: int, within: FileIdentity) -> bytes:
        try:
            return self._workspace.read_verified(path, max_bytes=max_bytes, within=within).data
        except WorkspaceError as error:
            raise VerificationFailed(field=error.field, rule=error.rule) from None
