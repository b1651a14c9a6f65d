"""The result of a finished attempt, verified for publication (``Publish``, docs/design.md,
"Publication"): the plan is the one submitted, its job COMPLETED with exit code 0, an import's
``chain.json`` holds the chain the job verified, the recorded architecture is the plan's and the
image's, and ``inspection.json`` is valid for the plan's role and the ``.sqsh`` as hashed now.
What it verified is the alias entry to bind, the image's digest and the source records to write.
"""

from __future__ import annotations

import json
import logging

from slurm_image.application.alias_binding import alias_record
from slurm_image.application.catalog_reader import require_unchangeable
from slurm_image.application.credentials import remove_staged_credentials
from slurm_image.application.errors import JobNotSuccessful, VerificationFailed
from slurm_image.application.records import attempt_directory, read_submission
from slurm_image.application.status import LifecycleStatus, Statuses, is_final, succeeded, utc_text
from slurm_image.application.store_records import StoreRecords
from slurm_image.domain.architecture import (
    ARCHITECTURE_RECORD_MAX_BYTES,
    ARCHITECTURES,
    from_machine,
    read_architecture_record,
)
from slurm_image.domain.canonical import sha256_hex
from slurm_image.domain.errors import DomainError
from slurm_image.domain.inspection import MAX_INSPECTION_BYTES, validate_inspection
from slurm_image.domain.lifecycle_state import LifecycleState
from slurm_image.domain.plan import PLAN_MAX_BYTES, Plan, load_plan
from slurm_image.domain.publication import (
    AliasRecord,
    JobRun,
    SourceRecord,
    facts_of,
)
from slurm_image.domain.verified_chain import (
    CHAIN_RECORD_MAX_BYTES,
    VerifiedChain,
    validate_chain_record,
)
from slurm_image.ports.clock import Clock
from slurm_image.ports.hasher import FileDigest
from slurm_image.ports.store import Store
from slurm_image.ports.workspace import NotFound, WorkspaceError

log = logging.getLogger(__name__)


class VerifyResult:
    """Reads and checks a finished attempt through the store; raises ``JobNotSuccessful`` or
    ``VerificationFailed`` and writes nothing but the removal of the attempt's staged
    credentials once its job has ended."""

    def __init__(
        self, store: Store, records: StoreRecords, statuses: Statuses, clock: Clock
    ) -> None:
        self._store = store
        self._records = records
        self._layout = records.layout
        self._statuses = statuses
        self._clock = clock

    def plan(self, lifecycle_id: str) -> Plan:
        submission = read_submission(self._store, lifecycle_id)
        if submission is None:
            raise JobNotSuccessful(
                field="lifecycle_id", rule=f"{lifecycle_id} was never submitted: nothing to publish"
            )
        layout, identity = attempt_directory(self._store, lifecycle_id)
        try:
            data = self._store.read_verified(
                layout.plan, max_bytes=PLAN_MAX_BYTES, within=identity
            ).data
            plan = load_plan(data)
        except WorkspaceError as error:
            raise VerificationFailed(field=error.field, rule=error.rule) from None
        except DomainError as error:
            raise VerificationFailed(
                field=layout.plan, rule=f"{error.field}: {error.rule}"
            ) from None
        if plan.lifecycle_id != lifecycle_id or sha256_hex(data) != submission.plan_sha256:
            raise VerificationFailed(field=layout.plan, rule="is not the plan that was submitted")
        if plan.profile.workspace_root != self._store.root:
            raise VerificationFailed(
                field="workspace_root", rule=f"the plan names {plan.profile.workspace_root}"
            )
        return plan

    def require_success(self, lifecycle_id: str) -> LifecycleStatus:
        """The status of the lifecycle's job, which must have succeeded (else
        ``JobNotSuccessful``)."""
        (status,) = self._statuses([lifecycle_id])
        if status.state is not LifecycleState.SUBMISSION_UNKNOWN and is_final(
            status
        ):  # a job that never ran its trap
            try:  # left its registry credentials
                remove_staged_credentials(self._store, lifecycle_id)
            except WorkspaceError as error:
                raise VerificationFailed(field=error.field, rule=error.rule) from None
        if succeeded(status):
            return status
        detail = f" (exit {status.exit_code})" if status.exit_code is not None else ""
        reason = f": {status.reason}" if status.reason else ""
        raise JobNotSuccessful(
            field="state",
            rule=f"job {status.job_id} of {lifecycle_id} is {status.state}{detail}{reason};"
            " only a COMPLETED job with exit code 0 is published",
        )

    def _verified_chain(self, plan: Plan) -> VerifiedChain:
        """The chain the import job verified, from its ``chain.json``: written only when every
        link from the pinned digest to the config hashed right, so without it nothing is
        known about what the registry served."""
        layout, identity = attempt_directory(self._store, plan.lifecycle_id)
        path = layout.chain_record
        if plan.source_digest is None:
            raise VerificationFailed(
                field=path, rule="an import plan without a source digest has no chain"
            )
        try:
            data = self._store.read_verified(
                path, max_bytes=CHAIN_RECORD_MAX_BYTES, within=identity
            ).data
        except NotFound:
            raise VerificationFailed(
                field=path,
                rule="does not exist: the job recorded no verified chain from the pinned digest"
                f" {plan.source_digest}, so the import is not published",
            ) from None
        except WorkspaceError as error:
            raise VerificationFailed(field=error.field, rule=error.rule) from None
        try:
            return validate_chain_record(data, pinned=plan.source_digest)
        except DomainError as error:
            raise VerificationFailed(field=path, rule=f"{error.field}: {error.rule}") from None

    def __call__(
        self, plan: Plan, status: LifecycleStatus | None = None
    ) -> tuple[AliasRecord, FileDigest, tuple[SourceRecord, ...]]:
        """The entry to bind for ``plan``'s verified result (with its job, from the
        ``status`` its success was read from), the image's digest and the source records."""
        role = plan.request.role
        importing = plan.operation == "import_oci"
        if plan.schema_version == 1:
            raise VerificationFailed(
                field=plan.paths.plan,
                rule="was staged before architectures were recorded: run the import (or"
                " inspect) again",
            )
        chain = self._verified_chain(plan) if importing else None
        recorded = self._recorded_architecture(plan)
        if not importing:
            require_unchangeable(self._store, plan.paths.sqsh)
        try:
            data = self._store.read_stable(plan.paths.result, max_bytes=MAX_INSPECTION_BYTES).data
            digest = self._store.digest(self._image_of(plan, data))
        except WorkspaceError as error:
            raise VerificationFailed(field=error.field, rule=error.rule) from None
        try:
            inspection = validate_inspection(data, role=role, sqsh_sha256=digest.sha256)
        except DomainError as error:
            raise VerificationFailed(
                field=f"inspection.{error.field}" if error.field != "inspection" else error.field,
                rule=error.rule,
            ) from None
        architecture = _image_architecture(recorded, inspection.machine)
        log.info(
            "result verified: %s image for %s, .sqsh %s sha256 %s",
            role,
            architecture,
            plan.paths.sqsh,
            digest.sha256,
            extra={"lifecycle_id": plan.lifecycle_id},
        )
        facts = facts_of(inspection, plan.lifecycle_id)
        path = self._layout.artifact(digest.sha256) if importing else plan.paths.sqsh
        source_text, source_digest = plan.request.source, plan.source_digest
        sources: list[SourceRecord] = []
        signed_by = plan.signed_by
        private_group = plan.request.group if plan.request.private else None
        if importing and chain is not None:
            for digest_of_source in dict.fromkeys((chain.pinned, chain.manifest)):
                source = SourceRecord(
                    schema_version=SourceRecord.version_for(plan.signed_by, private_group),
                    source_digest=digest_of_source,
                    source=source_text,
                    sqsh_sha256=digest.sha256,
                    roles={},
                    chain=chain,
                    architecture=architecture,
                    signed_by=plan.signed_by,
                    private_group=private_group,
                )
                known = self._records.source(digest_of_source, architecture)
                if known is not None and known.sqsh_sha256 == digest.sha256:
                    # the same bytes: their facts stand, and this import's chain now proves them
                    source = source.model_copy(update={"roles": known.roles})
                sources.append(source)
        elif self._layout.in_store(path) == digest.sha256:
            sources = self._records.sources_of_artifact(digest.sha256, architecture)
            named = _named_source(sources)
            if named is not None:
                source_text, source_digest, chain = named.source, named.source_digest, named.chain
                signed_by = named.signed_by
        sources = [source.with_role(role, facts) for source in sources]
        record = alias_record(
            plan.request,
            path=path,
            digest=digest,
            facts=facts,
            source=source_text,
            source_digest=source_digest,
            chain=chain,
            architecture=architecture,
            signed_by=signed_by,
            clock=self._clock,
            job=None if status is None else job_run(status),
        )
        return record, digest, tuple(sources)

    def _recorded_architecture(self, plan: Plan) -> str | None:
        """The architecture the job recorded (``architecture``: it imported for it, or checked
        the node runs it), None when it recorded none (an inspect of the image's own); it must
        be the plan's when the plan names one, and an import always records one."""
        layout, identity = attempt_directory(self._store, plan.lifecycle_id)
        path = layout.architecture_record
        try:
            data: bytes | None = self._store.read_verified(
                path, max_bytes=ARCHITECTURE_RECORD_MAX_BYTES, within=identity
            ).data
        except NotFound:
            data = None
        except WorkspaceError as error:
            raise VerificationFailed(field=error.field, rule=error.rule) from None
        if data is None:
            if plan.operation == "import_oci" or plan.architecture is not None:
                raise VerificationFailed(
                    field=path, rule="does not exist: the job recorded no architecture"
                )
            return None
        try:
            recorded = read_architecture_record(data)
        except DomainError as error:
            raise VerificationFailed(field=path, rule=error.rule) from None
        if plan.architecture is not None and recorded != plan.architecture:
            raise VerificationFailed(
                field=path, rule=f"names {recorded}, not the plan's {plan.architecture}"
            )
        return recorded

    def _image_of(self, plan: Plan, result: bytes) -> str:
        """The ``.sqsh`` to hash: the attempt's own, or, when an earlier publication of this
        import moved its candidate into the store, the stored artifact the result names (its
        bytes hashed now must still match, so the claim is only a place to look)."""
        if plan.paths.candidate is None or self._store.entry_kind(plan.paths.candidate):
            return plan.paths.sqsh
        try:
            claimed = json.loads(result).get("sqsh_sha256")
            return self._layout.artifact(claimed) if isinstance(claimed, str) else plan.paths.sqsh
        except (ValueError, AttributeError, RecursionError, DomainError):
            return plan.paths.sqsh


def job_run(status: LifecycleStatus) -> JobRun | None:
    """The job an entry's artifact came from, as its status gave it (None without a job)."""
    if status.job_id is None:
        return None
    return JobRun(
        job_id=status.job_id,
        started_at=utc_text(status.started_at),
        ended_at=utc_text(status.ended_at),
    )


def _named_source(sources: list[SourceRecord]) -> SourceRecord | None:
    """The record an alias of a stored artifact names as its source: the pinned digest's,
    rather than its per-architecture manifest's."""
    for source in sources:
        if source.chain is not None and source.source_digest == source.chain.pinned:
            return source
    return sources[0] if sources else None


def _image_architecture(recorded: str | None, machine: str | None) -> str:
    """The architecture of the inspected image: what the inspector ran as
    (``platform.machine()``), which must be what the job recorded, when it recorded one."""
    running = from_machine(machine or "")
    if running is None:
        raise VerificationFailed(
            field="inspection.machine",
            rule=f"the image ran as {machine!r}, none of {', '.join(ARCHITECTURES)}",
        )
    if recorded is not None and running != recorded:
        raise VerificationFailed(
            field="inspection.machine",
            rule=f"the image ran as {running}, not as {recorded}, which the job recorded",
        )
    return running
