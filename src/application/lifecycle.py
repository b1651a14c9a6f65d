"""The story of one image lifecycle, from a request to a published alias.

``Lifecycle`` decides every step and in which order; the steps themselves are the use cases
(``Prepare``, ``Submit``, ``Wait``, ``Publish``):

1. with a submission asked for, the profile's submitter must be usable here (a preflight:
   nothing is created when it is not);
2. an import for a named architecture whose source the store holds for that architecture
   (verified chain, artifact re-hashed now) is answered from the store when the store has
   facts for the role: no job (``force`` imports anyway); with the artifact but without facts
   for the role, the stored artifact is inspected instead of importing the image again; an
   import for "the node's architecture" (none named) is never answered from the store, but
   joins an import of the same image in flight that names none either (``Coalesce.target``);
3. stage the attempt (``Prepare``); without a submission, that is all;
4. submit it (``Submit``); a failure leaves it staged, and the error says how to retry;
5. with ``wait``: wait for the job (``Wait``), require its success, and publish (``Publish``).

The use cases are built when first needed, so a lifecycle only staged builds nothing of the
scheduler's side.
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from slurm_image.application.coalesce import Coalesce, Joined
from slurm_image.application.credentials import check_request_credentials
from slurm_image.application.errors import VerificationFailed
from slurm_image.application.permissions import Permissions, may_use_source
from slurm_image.application.prepare import Prepare
from slurm_image.application.publish import Publish
from slurm_image.application.submit import Submit
from slurm_image.application.wait import Progress, Wait, require_success
from slurm_image.domain.access import Access
from slurm_image.domain.architecture import BuildTarget, build_target
from slurm_image.domain.credentials import RegistryCredentials
from slurm_image.domain.errors import InvalidRequest
from slurm_image.domain.lifecycle_state import LifecycleState
from slurm_image.domain.policy import require_allowed_source
from slurm_image.domain.profile import ProfileSelection, SiteProfile
from slurm_image.domain.publication import AliasRecord, SourceRecord
from slurm_image.domain.reference import parse_reference
from slurm_image.domain.request import Request, make_request
from slurm_image.domain.store_layout import StoreLayout

if TYPE_CHECKING:
    from slurm_image.application.lifecycle_rights import LifecycleRights
    from slurm_image.application.signature_check import CheckSignature

log = logging.getLogger(__name__)

RETRY_COMMAND = "slurm-image submit"


@dataclass(frozen=True)
class Outcome:
    """Where one lifecycle ended.

    ``state``: ``STAGED`` (not submitted), ``SUBMITTED``, or ``PUBLISHED`` (``published`` holds
    the record; ``from_store`` when no job ran because the store had the answer).
    """

    lifecycle_id: str
    state: LifecycleState
    job_id: str | None = None
    job_directory: str | None = None
    published: AliasRecord | None = None
    from_store: bool = False
    joined: bool = False
    """The request joined a lifecycle already importing its source (one job for many)."""

    def as_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "lifecycle_id": self.lifecycle_id,
            "job_id": self.job_id,
            "state": self.state,
        }
        if self.job_directory is not None:
            data["job_directory"] = self.job_directory
        if self.published is not None:
            data |= self.published.details() | {
                "lifecycle_id": self.lifecycle_id,
                "from_store": self.from_store,
            }
        if self.joined:
            data["joined"] = True
        return data


@dataclass(frozen=True)
class LifecycleOptions:
    """How far one lifecycle goes: ``submit`` (else only staged), ``wait`` (and publish),
    ``timeout_s`` of the wait, ``replace`` an existing alias, ``force`` an import the store
    could answer, ``on_poll`` a progress display while waiting."""

    submit: bool = True
    wait: bool = False
    timeout_s: float | None = None
    replace: bool = False
    force: bool = False
    on_poll: Progress | None = None


def _same_order(one: Request, other: Request) -> bool:
    """Whether two requests ask for the same alias for the same requester."""
    return (one.name, one.requester) == (other.name, other.requester)


class Lifecycle:
    """Drive one lifecycle as far as its options say (see the module docstring)."""

    def __init__(
        self,
        *,
        prepare: Callable[[], Prepare],
        submit: Callable[[], Submit],
        wait: Callable[[], Wait],
        publish: Callable[[], Publish],
        require_submitter: Callable[[], None],
        check_signature: Callable[[], CheckSignature] | None = None,
        coalesce: Callable[[], Coalesce] | None = None,
        permissions: Callable[[], Permissions] | None = None,
        rights: Callable[[], LifecycleRights] | None = None,
    ) -> None:
        self._prepare = prepare
        self._rights = rights
        self._submit = submit
        self._wait = wait
        self._publish = publish
        self._require_submitter = require_submitter
        self._check_signature = check_signature
        self._coalesce = coalesce
        self._permissions = permissions

    def __call__(
        self,
        request: Request,
        profile: SiteProfile,
        selection: ProfileSelection,
        options: LifecycleOptions,
        *,
        credentials: RegistryCredentials | None = None,
    ) -> Outcome:
        """``credentials``: the requester's own entry for the source's registry, sent with a
        request through the gateway (the request is then private to its group)."""
        check_request_credentials(request, credentials)
        if not options.submit:
            return self._run(request, profile, selection, options, credentials)
        self._require_submitter()
        access = self._may_request(request)
        coalesce = self._coalesce() if self._coalesce is not None else None
        if request.operation == "import_oci" and not options.force:
            # before any lock or record of the store: a refusal touches nothing
            require_allowed_source(parse_reference(request.source), profile.policy)
            target = coalesce.target(request, profile) if coalesce is not None else None
            if coalesce is not None and target is not None and target.architecture is not None:
                self._prepare().require_credentials(request, profile, credentials)
                return self._coalesced(
                    coalesce,
                    target,
                    request,
                    profile,
                    selection,
                    options,
                    credentials,
                    access,
                )
            answered = self._from_store(request, profile, replace=options.replace, access=access)
            if isinstance(answered, Outcome):
                return answered
            request = answered
        if coalesce is None:
            return self._run(request, profile, selection, options, credentials)
        started = self._started(coalesce, request, profile, selection, options, credentials, access)
        return self._waited(started, options)

    def _coalesced(
        self,
        coalesce: Coalesce,
        target: BuildTarget,
        request: Request,
        profile: SiteProfile,
        selection: ProfileSelection,
        options: LifecycleOptions,
        credentials: RegistryCredentials | None,
        access: Access | None,
    ) -> Outcome:
        """An import for an architecture named or assumed (``Coalesce.target``): the store's
        answer, else joining the lifecycle importing the same image for it, else a lifecycle of
        its own, decided under the import's lock (``application.coalesce``)."""
        with coalesce.deciding(parse_reference(request.source).digest):
            answered = self._from_store(request, profile, replace=options.replace, access=access)
            if isinstance(answered, Outcome):
                return answered
            joined = None
            if answered.operation == "import_oci":
                joined = coalesce.join(answered, target, access, replace=options.replace)
            if joined is None:
                started = self._started(
                    coalesce, answered, profile, selection, options, credentials, access
                )
        if joined is not None:
            return self._finish_joined(joined, answered, options)
        return self._waited(started, options)

    def _started(
        self,
        coalesce: Coalesce,
        request: Request,
        profile: SiteProfile,
        selection: ProfileSelection,
        options: LifecycleOptions,
        credentials: RegistryCredentials | None,
        access: Access | None,
    ) -> Outcome:
        """Within the limits on lifecycles in flight, stage and submit, and open the
        lifecycle's order book (what whoever settles the store publishes, and what others
        join)."""
        coalesce.require_capacity(access)
        started = self._run(request, profile, selection, replace(options, wait=False), credentials)
        target = coalesce.target(request, profile)
        coalesce.open_book(started.lifecycle_id, request, target, replace=options.replace)
        return started

    def _may_request(self, request: Request) -> Access | None:
        """The requester may import, share with its group, and change the alias it names
        (``application.permissions``); checked before anything is asked or staged."""
        if self._permissions is None:
            return None
        permissions = self._permissions()
        access = permissions.require_may_request(request.requester, request.ownership)
        existing = self._publish().alias(request.name)
        if existing is not None:
            access.require_owner(
                existing.ownership, field="name", what=f"changing alias {request.name}"
            )
        return access

    def _run(
        self,
        request: Request,
        profile: SiteProfile,
        selection: ProfileSelection,
        options: LifecycleOptions,
        credentials: RegistryCredentials | None,
    ) -> Outcome:
        prepared = self._prepare()(request, profile, selection, given_credentials=credentials)
        lifecycle_id = prepared.lifecycle_id
        if not options.submit:
            return Outcome(
                lifecycle_id, LifecycleState.STAGED, job_directory=prepared.job_directory
            )
        try:
            submission = self._submit()(prepared)
        except Exception as error:
            error.add_note(
                f"lifecycle {lifecycle_id} stays staged in {prepared.job_directory};"
                f" retry with: {RETRY_COMMAND} {lifecycle_id}"
            )
            raise
        submitted = Outcome(lifecycle_id, LifecycleState.SUBMITTED, job_id=submission.job_id)
        return self._waited(submitted, options)

    def _waited(self, submitted: Outcome, options: LifecycleOptions) -> Outcome:
        """With ``wait``, the submitted lifecycle waited for and published; else as it is."""
        if not options.wait:
            return submitted
        lifecycle_id = submitted.lifecycle_id
        waited = self._wait()([lifecycle_id], timeout_s=options.timeout_s, on_poll=options.on_poll)
        require_success(waited)
        record = self._publish()(lifecycle_id, replace=options.replace).record
        return Outcome(
            lifecycle_id, LifecycleState.PUBLISHED, job_id=submitted.job_id, published=record
        )

    def _finish_joined(
        self, joined: Joined, request: Request, options: LifecycleOptions
    ) -> Outcome:
        """A request that joined a lifecycle in flight: without ``wait``, the lifecycle it
        waits on; with it, its own alias bound once that lifecycle published."""
        if not options.wait:
            return Outcome(
                joined.lifecycle_id, LifecycleState.SUBMITTED, job_id=joined.job_id, joined=True
            )
        waited = self._wait()(
            [joined.lifecycle_id], timeout_s=options.timeout_s, on_poll=options.on_poll
        )
        require_success(waited)
        return self.finish(joined.lifecycle_id, request, replace=options.replace)

    def finish(self, lifecycle_id: str, request: Request, *, replace: bool) -> Outcome:
        """Publish the lifecycle whose job succeeded, for ``request``: the lifecycle's own
        request is published as ``Publish`` does; a request that joined it is bound to the
        artifact once it is published (with the replace its own order holds for the
        lifecycle's alias). To a requester who may not know of the lifecycle it is unknown;
        one who neither owns nor joined it binds only what the store holds from it, and
        publishes nothing (``application.lifecycle_rights``)."""
        rights = self._rights() if self._rights is not None else None
        if rights is not None:
            rights.require_seen(lifecycle_id)
        publisher = self._publish()
        plan = publisher.plan(lifecycle_id)
        if _same_order(plan.request, request):
            record = publisher(lifecycle_id, replace=replace).record
            return Outcome(lifecycle_id, LifecycleState.PUBLISHED, published=record)
        if request.operation != "import_oci" or plan.operation != "import_oci":
            raise InvalidRequest(
                field="lifecycle_id",
                rule=f"{lifecycle_id} imports another request's image: only an import joins",
            )
        target = self._target(request, plan.profile)
        digest = plan.source_digest
        if (
            target.architecture is None
            or digest is None
            or parse_reference(request.source).digest != digest
        ):
            raise InvalidRequest(
                field="lifecycle_id",
                rule=f"{lifecycle_id} does not import {request.source} for a known architecture",
            )
        access = self._may_request(request)
        if rights is None or rights.may_publish(lifecycle_id):
            built = publisher.permitted(
                lifecycle_id, replace=publisher.first_order_replace(lifecycle_id)
            )
            if built.record.architecture != target.architecture:
                raise VerificationFailed(
                    field="architecture",
                    rule=f"the import {lifecycle_id} built {built.record.architecture}, not the"
                    f" {target.architecture} this request is for: import it again",
                )
        source = publisher.stored_source(digest, target.architecture)
        if source is None and rights is not None:
            rights.require_publisher(lifecycle_id)
        if source is None or not may_use_source(source, request.ownership, access):
            raise VerificationFailed(
                field="source",
                rule=f"the import {lifecycle_id} published nothing the store can answer"
                " this request from",
            )
        record = publisher.bind_stored(request, source, replace=replace).record
        return Outcome(lifecycle_id, LifecycleState.PUBLISHED, published=record, joined=True)

    def _target(self, request: Request, profile: SiteProfile) -> BuildTarget:
        """The architecture ``request`` is built for (``Coalesce.target``)."""
        if self._coalesce is not None:
            return self._coalesce().target(request, profile)
        return build_target(request.architecture, profile.image_build.arch, platform.machine())

    def _satisfies_policy(self, source: SourceRecord, profile: SiteProfile) -> bool:
        policy = profile.policy
        if policy is None or not policy.require_signature:
            return True
        if self._check_signature is None:
            return False
        return self._check_signature().satisfies(source.signed_by, profile)

    def _from_store(
        self,
        request: Request,
        profile: SiteProfile,
        *,
        replace: bool,
        access: Access | None = None,
    ) -> Outcome | Request:
        """The store's answer to an import, or the request to run: the import itself, or an
        inspection of the stored artifact when the store lacks facts for the role. A
        stored record answers only when it satisfies the policy in force now (its signature
        by a key still trusted) and, for a source imported with someone's own registry
        credentials, only its group; otherwise the import runs, and checks the registry's
        signatures itself. The source is within the policy's registries (``__call__`` checked it
        first)."""
        architecture = request.architecture or profile.image_build.arch
        if architecture is None:
            log.info(
                "no architecture asked for (--arch, [image_build] arch): the job imports for"
                " its node's, so the store cannot answer %s",
                request.source,
            )
            return request
        publisher = self._publish()
        source = publisher.stored_source(parse_reference(request.source).digest, architecture)
        if source is None:
            return request
        if not may_use_source(source, request.ownership, access):
            log.info(
                "the store's record of %s is kept for another group alone: importing",
                request.source,
            )
            return request
        if not self._satisfies_policy(source, profile):
            log.info(
                "the store's record of %s does not satisfy the signature policy in force:"
                " importing again",
                request.source,
            )
            return request
        if request.role in source.roles:
            record = publisher.bind_stored(request, source, replace=replace).record
            return Outcome(
                record.lifecycle_id, LifecycleState.PUBLISHED, published=record, from_store=True
            )
        artifact = StoreLayout(profile.workspace_root).artifact(source.sqsh_sha256)
        log.info(
            "%s is in the store as %s without %s facts: inspecting the stored artifact",
            request.source,
            artifact,
            request.role,
        )
        # The stored artifact stands for a source that satisfied the policy just above: its
        # signature was checked, the local file's absence of one is not a reason to refuse.
        policy = profile.policy
        return make_request(
            "inspect_sqsh",
            unsigned_ok=policy is not None and policy.require_signature,
            name=request.name,
            role=request.role,
            source=artifact,
            architecture=architecture,
            resolved_from=request.resolved_from,
            requester=request.requester,
            group=request.group,
        )
