"""Prepare a lifecycle: validate the request, derive the plan, render the script, stage."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from slurm_image.application.credentials import read_registry_credentials
from slurm_image.application.errors import LifecycleExists, VerificationFailed, WrongWorkspace
from slurm_image.domain import paths
from slurm_image.domain.attempt import ATTEMPT_RECORD_MODE, StagedRecord
from slurm_image.domain.canonical import sha256_hex
from slurm_image.domain.credentials import (
    CREDENTIALS_MODE,
    CREDENTIALS_NAME,
    RegistryCredentials,
)
from slurm_image.domain.errors import InvalidPath, Unsigned
from slurm_image.domain.identity import FileIdentity
from slurm_image.domain.plan import Plan, derive_plan
from slurm_image.domain.policy import require_allowed_source
from slurm_image.domain.profile import ProfileSelection, SiteProfile
from slurm_image.domain.reference import parse_reference
from slurm_image.domain.request import Request
from slurm_image.domain.runtime import RuntimeFiles
from slurm_image.domain.script import render_script
from slurm_image.domain.signed_by import SignedBy
from slurm_image.ports.clock import Clock
from slurm_image.ports.credentials import CredentialsFile
from slurm_image.ports.workspace import AlreadyExists, Workspace, WorkspaceError

if TYPE_CHECKING:
    from slurm_image.application.signature_check import CheckSignature

log = logging.getLogger(__name__)

PLAN_MODE = 0o600
EXECUTABLE_MODE = 0o500


def new_lifecycle_id() -> str:
    return f"{paths.LIFECYCLE_ID_PREFIX}{uuid.uuid4().hex}"


@dataclass(frozen=True)
class PlannedLifecycle:
    """A plan and its script, before anything is staged.

    ``credentials``: the one netrc entry an import will stage (the plan names only its host);
    held in memory, never printed.
    """

    plan: Plan
    script: str
    credentials: RegistryCredentials | None = field(default=None, repr=False)


def registry_credentials(
    request: Request, profile: SiteProfile, credentials_file: CredentialsFile | None
) -> RegistryCredentials | None:
    """The credentials an import of ``request`` uses: the entry of the profile's
    ``credentials_file`` for the source's registry host as Enroot contacts it. None for an
    inspect, without a file, or without an entry (the import then runs anonymously)."""
    if request.operation != "import_oci":
        return None
    registry = parse_reference(request.source).enroot_registry
    return read_registry_credentials(profile, credentials_file, registry)


def require_unchangeable_image(workspace: Workspace, source: str) -> None:
    """Refuse to inspect a ``.sqsh`` whose bytes someone other than the user and root could
    change (the file, or a directory on its way): what is published must stay what was
    inspected (README, Threat model). ``InvalidPath`` of ``source``, before anything exists."""
    problem = workspace.image_problem(source)
    if problem is not None:
        raise InvalidPath(
            field="source",
            rule=f"{problem}; what is published must stay what was inspected, so the image must"
            " be a regular file that only you or root can change, in directories that only"
            f" you or root can change: {paths.IMAGE_COPY_HINT}",
            value=source,
        )


def require_unsigned_ok(request: Request, profile: SiteProfile) -> None:
    """Under ``policy.require_signature``, refuse to inspect a local ``.sqsh`` unless the
    request says ``unsigned_ok``: a file carries no signature to check. ``Unsigned`` (a
    ``SignatureRefused``) of ``source``, before anything is staged."""
    policy = profile.policy
    if policy is not None and policy.require_signature and not request.unsigned_ok:
        raise Unsigned(
            field="source",
            rule="policy.require_signature is set and a local .sqsh carries no signature to"
            " check: inspect it with --unsigned-ok to proceed anyway (the plan records it)",
            value=request.source,
        )


class PlanLifecycle:
    """Derive a plan and its script. Creates nothing: ``--dry-run`` is exactly this.

    ``check_signature`` builds the signature check, called only for an import whose policy
    requires a signature: a plan that needs none builds no registry client and loads nothing
    of the signatures' cryptography."""

    def __init__(
        self,
        clock: Clock,
        runtime: RuntimeFiles,
        credentials: CredentialsFile | None = None,
        home: str | None = None,
        check_signature: Callable[[], CheckSignature] | None = None,
    ) -> None:
        self._clock = clock
        self._runtime = runtime
        self._credentials = credentials
        self._home = home
        self._check_signature = check_signature

    def require_credentials(
        self, request: Request, profile: SiteProfile, given: RegistryCredentials | None
    ) -> None:
        """Refuse now what planning ``request`` would refuse of the profile's credentials file
        (its modes, its size, its entry), reading nothing else."""
        if given is None or request.operation != "import_oci":
            registry_credentials(request, profile, self._credentials)

    def __call__(
        self,
        request: Request,
        profile: SiteProfile,
        selection: ProfileSelection,
        lifecycle_id: str | None = None,
        *,
        given_credentials: RegistryCredentials | None = None,
    ) -> PlannedLifecycle:
        """``given_credentials``: the requester's own entry for the source's registry, sent
        with a request through the gateway, used instead of the profile's file."""
        credentials = (
            given_credentials
            if given_credentials is not None and request.operation == "import_oci"
            else registry_credentials(request, profile, self._credentials)
        )
        signed_by = self._signature(request, profile)
        plan = derive_plan(
            request,
            profile,
            selection,
            lifecycle_id=lifecycle_id or new_lifecycle_id(),
            created_at=self._clock.now(),
            runtime=self._runtime.digests(),
            credentials_host=credentials.host if credentials else None,
            home=self._home,
            signed_by=signed_by,
        )
        return PlannedLifecycle(plan=plan, script=render_script(plan), credentials=credentials)

    def _signature(self, request: Request, profile: SiteProfile) -> SignedBy | None:
        """The signature the policy accepts (``CheckSignature``), after the checks that need
        no registry (the source's grammar, ``allowed_registries``); without a checker, an
        import the policy requires a signature for is refused rather than let through."""
        if request.operation != "import_oci":
            require_unsigned_ok(request, profile)
            return None
        require_allowed_source(parse_reference(request.source), profile.policy)
        if profile.policy is None or not profile.policy.require_signature:
            return None
        if self._check_signature is None:
            raise Unsigned(
                field=parse_reference(request.source).digest,
                rule="policy.require_signature is set and no signature lookup is configured",
            )
        return self._check_signature()(request, profile)


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
    """Validate → plan → stage (docs/design.md, "The plan and staging").

    Staging creates the attempt directory exclusively (a duplicate lifecycle id fails with
    ``LifecycleExists``), writes plan.json (0600), job.sbatch, inspect_image.py and enroot.rc
    (0500) and output/ (0700) inside it, each created exclusively and bound to the directory's
    identity, then records their digests and that identity in staged.json. An import whose
    registry has an entry in the profile's credentials file also gets that one entry, 0600, as
    enroot/config/.credentials (its digest in staged.json, only its host in the plan). A
    failure midway removes the attempt directory again (without following symlinks) and
    re-raises: nothing is left half-staged. Validation errors are raised before anything is created.
    """

    def __init__(
        self,
        clock: Clock,
        runtime: RuntimeFiles,
        workspace: Workspace,
        credentials: CredentialsFile | None = None,
        home: str | None = None,
        check_signature: Callable[[], CheckSignature] | None = None,
    ) -> None:
        self._planner = PlanLifecycle(clock, runtime, credentials, home, check_signature)
        self._runtime = runtime
        self._workspace = workspace

    def require_credentials(
        self, request: Request, profile: SiteProfile, given: RegistryCredentials | None
    ) -> None:
        """``PlanLifecycle.require_credentials``: before anything of the store is touched."""
        self._planner.require_credentials(request, profile, given)

    def __call__(
        self,
        request: Request,
        profile: SiteProfile,
        selection: ProfileSelection,
        lifecycle_id: str | None = None,
        *,
        given_credentials: RegistryCredentials | None = None,
    ) -> PreparedLifecycle:
        if profile.workspace_root != self._workspace.root:
            raise WrongWorkspace(
                field="workspace_root", rule=f"the workspace is bound to {self._workspace.root}"
            )
        if request.operation == "inspect_sqsh":
            require_unchangeable_image(self._workspace, request.source)
        planned = self._planner(
            request, profile, selection, lifecycle_id, given_credentials=given_credentials
        )
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
                field="lifecycle_id",
                rule=f"an attempt {plan.lifecycle_id} already exists in the workspace",
            ) from None
        try:
            digests: list[str] = []
            for path, data, mode in files:
                written = workspace.write_new(path, data, mode=mode, within=identity)
                if written.sha256 != sha256_hex(data) or written.mode != mode:
                    raise VerificationFailed(field=path, rule="was not staged as written")
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
                credentials_sha256=self._stage_credentials(planned, identity),
            )
            workspace.write_new(
                layout.staged_record,
                staged.canonical_bytes(),
                mode=ATTEMPT_RECORD_MODE,
                within=identity,
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

    def _stage_credentials(self, planned: PlannedLifecycle, within: FileIdentity) -> str | None:
        """Write the import's one netrc entry, 0600, into the attempt's private Enroot config
        directory (``enroot/config``, each directory 0700); return its digest."""
        if planned.credentials is None:
            return None
        plan, workspace = planned.plan, self._workspace
        enroot_dir = plan.paths.enroot_config.rsplit("/", 1)[0]
        parent = workspace.create_directory(enroot_dir, mode=0o700, within=within)
        config = workspace.create_directory(plan.paths.enroot_config, mode=0o700, within=parent)
        path = f"{plan.paths.enroot_config}/{CREDENTIALS_NAME}"
        data = planned.credentials.netrc_bytes()
        written = workspace.write_new(path, data, mode=CREDENTIALS_MODE, within=config)
        if written.sha256 != sha256_hex(data) or written.mode != CREDENTIALS_MODE:
            raise VerificationFailed(field=path, rule="was not staged as written")
        log.info(
            "staged credentials for %s",
            planned.credentials.host,
            extra={"lifecycle_id": plan.lifecycle_id},
        )
        return written.sha256

    def _undo(self, job_dir: str, identity: FileIdentity, failure: BaseException) -> None:
        try:
            self._workspace.remove_tree(job_dir, expected=identity)
        except WorkspaceError as error:
            failure.add_note(f"the partly staged attempt could not be removed: {error}")
