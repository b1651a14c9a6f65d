"""The versioned, checksum-bound plan of one lifecycle attempt, and its invariants."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ValidationError, model_validator

from slurm_image.domain import layer_cache, paths
from slurm_image.domain.canonical import SHA256_HEX, canonical_json, sha256_hex
from slurm_image.domain.credentials import registry_host
from slurm_image.domain.errors import DomainError, PlanInvariantViolation
from slurm_image.domain.job import JobSpec, submission_marker
from slurm_image.domain.model_config import FROZEN, absent_when_none
from slurm_image.domain.policy import require_allowed_source
from slurm_image.domain.profile import ProfileSelection, SiteProfile
from slurm_image.domain.reference import parse_reference
from slurm_image.domain.request import Operation, Request
from slurm_image.domain.resolution import utc_time_text
from slurm_image.domain.signed_by import SignedBy

SCHEMA_VERSION = 5
"""The newest version: 2 adds ``architecture``, 3 the request's ``resolved_from`` (the tag an
import was resolved from), 4 ``signed_by`` (the signature the site policy accepted) and the
request's ``unsigned_ok`` (an inspection let through without one), 5 the request's
``requester``, ``group`` and ``private`` (a request made through the gateway). A plan is
written in the oldest version that holds it, so a plan without ``resolved_from`` or
``signed_by`` is version 2, byte for byte what it was before version 3 existed (its digest,
and the script that names it, unchanged); plans of versions 1 to 4 are read."""
PLAN_MAX_BYTES = 1 << 20
CONTAINER_PREFIX = "/.slurm-image"


class RuntimeDigests(BaseModel):
    """SHA-256 of the package-owned files staged beside the script."""

    model_config = FROZEN

    inspector_sha256: str
    rc_sha256: str

    @model_validator(mode="after")
    def _hex(self) -> RuntimeDigests:
        for field in ("inspector_sha256", "rc_sha256"):
            if not SHA256_HEX.fullmatch(getattr(self, field)):
                raise PlanInvariantViolation(
                    field=f"runtime.{field}", rule="must be 64 lowercase hex"
                )
        return self


class AttemptPaths(BaseModel):
    """Absolute paths of one attempt; every one derives from the workspace and the id."""

    model_config = FROZEN

    job_dir: str
    plan: str
    script: str
    inspector: str
    rc: str
    output_dir: str
    result: str
    home: str
    enroot_config: str
    stdout: str
    stderr: str
    candidate: str | None
    partial: str | None
    sqsh: str
    """The image the job inspects: the candidate (import) or the source file (inspect)."""

    @classmethod
    def derive(
        cls, workspace_root: str, lifecycle_id: str, operation: Operation, source: str
    ) -> AttemptPaths:
        layout = paths.AttemptLayout(workspace_root, lifecycle_id)
        importing = operation == "import_oci"
        candidate = layout.in_job("candidate.sqsh") if importing else None
        return cls(
            job_dir=layout.job_dir,
            plan=layout.plan,
            script=layout.in_job("job.sbatch"),
            inspector=layout.in_job("inspect_image.py"),
            rc=layout.in_job("enroot.rc"),
            output_dir=layout.in_job("output"),
            result=layout.in_job("output/inspection.json"),
            home=layout.in_job("home"),
            enroot_config=layout.in_job("enroot/config"),
            stdout=layout.in_job(layout.JOB_OUTPUT),
            stderr=layout.in_job(layout.JOB_ERROR),
            candidate=candidate,
            partial=f"{candidate}.partial" if candidate else None,
            sqsh=candidate if candidate else source,
        )


class Plan(BaseModel):
    """Everything the job will do, fixed before anything is staged."""

    model_config = FROZEN

    schema_version: Literal[1, 2, 3, 4, 5]
    lifecycle_id: str
    operation: Operation
    request: Request
    profile: SiteProfile
    profile_selection: ProfileSelection
    paths: AttemptPaths
    source_digest: str | None
    enroot_uri: str | None
    runtime: RuntimeDigests
    created_at: str
    architecture: str | None = absent_when_none()
    """The architecture the job imports (``enroot import -a``) or that the inspected image must
    be: the request's, else the profile's ``image_build.arch``; None: the node's own for an
    import (the job records which), the image's own for an inspect."""
    credentials_host: str | None = None
    """The registry host whose credentials the import uses (staged beside the plan, never in
    it); None: anonymous, and always None for an inspect."""
    layer_cache: str | None = absent_when_none()
    """The import's Enroot cache kept between jobs (the profile's ``enroot.layer_cache``, ``~``
    expanded); None: the job's own, empty scratch cache (the cache is off, an inspect, or a
    plan made before there was a cache)."""
    signed_by: SignedBy | None = absent_when_none()
    """The signature the profile's ``[policy]`` accepted for the pin (docs/design.md, "Image
    policy and signatures"); None: no signature was required (the policy applied is the
    profile's, recorded above)."""

    @model_validator(mode="after")
    def _invariants(self) -> Plan:
        def broken(field: str, rule: str) -> PlanInvariantViolation:
            return PlanInvariantViolation(field=field, rule=rule)

        try:
            paths.name(self.lifecycle_id, "lifecycle_id")
        except DomainError as error:
            raise broken("lifecycle_id", error.rule) from None
        if self.operation != self.request.operation:
            raise broken("operation", "must match the request's operation")
        expected = AttemptPaths.derive(
            self.profile.workspace_root, self.lifecycle_id, self.operation, self.request.source
        )
        for field in AttemptPaths.model_fields:
            if getattr(self.paths, field) != getattr(expected, field):
                raise broken(f"paths.{field}", "must derive from the workspace root and the id")
        if self.operation == "import_oci":
            reference = parse_reference(self.request.source)
            if self.source_digest != reference.digest:
                raise broken("source_digest", "must equal the digest of the source reference")
            if self.enroot_uri != reference.enroot_uri:
                raise broken("enroot_uri", "must be the Enroot form of the source reference")
            if not (self.paths.candidate or "").startswith(self.paths.job_dir + "/"):
                raise broken("paths.candidate", "must stay inside the attempt directory")
            if self.credentials_host not in (None, registry_host(reference.enroot_registry)):
                raise broken("credentials_host", "must be the source's registry host")
        else:
            if self.source_digest is not None:
                raise broken("source_digest", "an inspect plan has no source digest")
            if self.enroot_uri is not None:
                raise broken("enroot_uri", "an inspect plan has no Enroot URI")
            if self.paths.candidate is not None:
                raise broken("paths.candidate", "an inspect plan has no candidate")
            if self.credentials_host is not None:
                raise broken("credentials_host", "an inspect job never gets credentials")
        if self.layer_cache is not None:
            _check_layer_cache(self, self.layer_cache)
        wanted = self.request.architecture or self.profile.image_build.arch
        if self.architecture != wanted:
            raise broken("architecture", "must be the request's, else the profile's")
        if self.schema_version == 1 and self.architecture is not None:
            raise broken("architecture", "a schema version 1 plan has no architecture")
        if self.schema_version < 3 and self.request.resolved_from is not None:
            raise broken(
                "request.resolved_from",
                f"a schema version {self.schema_version} plan records no tag resolution",
            )
        if self.request.unsigned_ok and self.schema_version < 4:
            raise broken(
                "request.unsigned_ok",
                f"a schema version {self.schema_version} plan records no --unsigned-ok",
            )
        if self.request.gateway_fields and self.schema_version < 5:
            raise broken(
                "request.requester",
                f"a schema version {self.schema_version} plan records no requester or group",
            )
        if self.signed_by is not None:
            if self.schema_version < 4:
                raise broken(
                    "signed_by", f"a schema version {self.schema_version} plan records no signature"
                )
            if self.operation != "import_oci":
                raise broken("signed_by", "an inspect has no signature to record")
        if self.profile_selection.profile_sha256 != self.profile.sha256():
            raise broken("profile_selection.profile_sha256", "must be the profile's digest")
        try:
            created = datetime.fromisoformat(self.created_at.replace("Z", "+00:00"))
        except ValueError:
            raise broken("created_at", "must be an ISO 8601 UTC time") from None
        if created.utcoffset() is None or created.utcoffset() != UTC.utcoffset(None):
            raise broken("created_at", "must be in UTC")
        return self

    @property
    def marker(self) -> str:
        """The submission marker carried in the job comment: unique per attempt, naming the
        requester of a request made through the gateway (``job.submission_marker``)."""
        requester = self.request.requester
        return submission_marker(self.lifecycle_id, requester.user if requester else None)

    def canonical_bytes(self) -> bytes:
        return canonical_json(self.model_dump(mode="json"))

    def sha256(self) -> str:
        return sha256_hex(self.canonical_bytes())

    def job_spec(self) -> JobSpec:
        build = self.profile.image_build
        return JobSpec(
            name=f"slurm-image-{self.request.role}",
            partition=build.partition,
            account=build.account,
            qos=build.qos,
            cpus_per_task=build.cpus_per_task,
            memory=build.memory,
            time_limit=build.time_limit,
            working_directory=self.paths.job_dir,
            standard_output=self.paths.stdout,
            standard_error=self.paths.stderr,
            comment=self.marker,
        )


def _check_layer_cache(plan: Plan, cache: str) -> None:
    setting = plan.profile.enroot.layer_cache
    field = "layer_cache"
    if plan.operation != "import_oci":
        raise PlanInvariantViolation(field=field, rule="an inspect job uses no layer cache")
    if setting is False:
        raise PlanInvariantViolation(field=field, rule="the profile turns the layer cache off")
    try:
        paths.layer_cache(cache, field)
    except DomainError as error:
        raise PlanInvariantViolation(field=field, rule=error.rule) from None
    if isinstance(setting, str) and setting.startswith("~/"):
        if cache.startswith("~") or not cache.endswith(setting[1:]):
            raise PlanInvariantViolation(field=field, rule="must be the profile's, ~ expanded")
    elif cache != layer_cache.cache_path(setting, plan.profile.workspace_root, None):
        raise PlanInvariantViolation(field=field, rule="must be the profile's enroot.layer_cache")


def format_time(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise PlanInvariantViolation(
            field="created_at", rule="the clock must give an aware UTC time"
        )
    return utc_time_text(moment)


def derive_plan(
    request: Request,
    profile: SiteProfile,
    selection: ProfileSelection,
    *,
    lifecycle_id: str,
    created_at: datetime,
    runtime: RuntimeDigests,
    credentials_host: str | None = None,
    home: str | None = None,
    signed_by: SignedBy | None = None,
) -> Plan:
    """Derive the plan of one attempt. Pure: the id, the time and the digests are given, and
    so is the host of the credentials an import will use (None: anonymous) and the home
    directory a ``~/`` layer cache is expanded with, and the signature the policy accepted
    (``signed_by``, checked before: the plan records it, it does not verify it)."""
    paths.name(lifecycle_id, "lifecycle_id")
    reference = parse_reference(request.source) if request.operation == "import_oci" else None
    if reference is not None:
        require_allowed_source(reference, profile.policy)
    return Plan(
        schema_version=(
            5
            if request.gateway_fields
            else 4
            if signed_by is not None or request.unsigned_ok
            else 3
            if request.resolved_from is not None
            else 2
        ),
        lifecycle_id=lifecycle_id,
        operation=request.operation,
        request=request,
        profile=profile,
        profile_selection=selection,
        paths=AttemptPaths.derive(
            profile.workspace_root, lifecycle_id, request.operation, request.source
        ),
        source_digest=reference.digest if reference else None,
        enroot_uri=reference.enroot_uri if reference else None,
        runtime=runtime,
        created_at=format_time(created_at),
        architecture=request.architecture or profile.image_build.arch,
        credentials_host=credentials_host,
        layer_cache=(
            layer_cache.cache_path(profile.enroot.layer_cache, profile.workspace_root, home)
            if reference
            else None
        ),
        signed_by=signed_by,
    )


def load_plan(data: bytes) -> Plan:
    """Parse plan bytes, refusing anything that is not a valid plan with intact invariants.

    Raises ``PlanInvariantViolation`` (the field that disagrees, or ``plan`` for bad JSON).
    """
    if len(data) > PLAN_MAX_BYTES:
        raise PlanInvariantViolation(field="plan", rule=f"must be at most {PLAN_MAX_BYTES} bytes")
    try:
        plan = Plan.model_validate_json(data)
    except ValidationError as error:
        first = error.errors()[0]
        cause = first.get("ctx", {}).get("error")
        if isinstance(cause, DomainError):
            raise PlanInvariantViolation(field=cause.field, rule=cause.rule) from None
        location = ".".join(str(part) for part in first["loc"]) or "plan"
        raise PlanInvariantViolation(field=location, rule=first["msg"]) from None
    if plan.canonical_bytes() != data:
        raise PlanInvariantViolation(field="plan", rule="must be in canonical form")
    return plan
