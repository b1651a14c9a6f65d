"""The story of one image lifecycle, from a request to a published alias.

``Lifecycle`` decides every step and in which order; the steps themselves are the use cases
(``Prepare``, ``Submit``, ``Wait``, ``Publish``):

1. with a submission asked for, the profile's submitter must be usable here (a preflight:
   nothing is created when it is not);
2. an import for a named architecture whose source the store holds for that architecture
   (verified chain, artifact re-hashed now) is answered from the store when the store has
   facts for the role: no job (``force`` imports anyway); with the artifact but without facts
   for the role, the stored artifact is inspected instead of importing the image again; an
   import for "the node's architecture" (none named) always runs its job;
3. stage the attempt (``Prepare``); without a submission, that is all;
4. submit it (``Submit``); a failure leaves it staged, and the error says how to retry;
5. with ``wait``: wait for the job (``Wait``), require its success, and publish (``Publish``).

The use cases are built when first needed, so a lifecycle only staged builds nothing of the
scheduler's side.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slurm_image.application.prepare import Prepare
from slurm_image.application.publish import Publish
from slurm_image.application.submit import Submit
from slurm_image.application.wait import Progress, Wait, require_success
from slurm_image.domain.lifecycle_state import LifecycleState
from slurm_image.domain.policy import require_allowed_source
from slurm_image.domain.profile import ProfileSelection, SiteProfile
from slurm_image.domain.publication import AliasRecord, SourceRecord
from slurm_image.domain.reference import parse_reference
from slurm_image.domain.request import Request, make_request
from slurm_image.domain.store_layout import StoreLayout

if TYPE_CHECKING:
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
    ) -> None:
        self._prepare = prepare
        self._submit = submit
        self._wait = wait
        self._publish = publish
        self._require_submitter = require_submitter
        self._check_signature = check_signature

    def __call__(
        self,
        request: Request,
        profile: SiteProfile,
        selection: ProfileSelection,
        options: LifecycleOptions,
    ) -> Outcome:
        if options.submit:
            self._require_submitter()
            if request.operation == "import_oci" and not options.force:
                answered = self._from_store(request, profile, replace=options.replace)
                if isinstance(answered, Outcome):
                    return answered
                request = answered
        prepared = self._prepare()(request, profile, selection)
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
        if not options.wait:
            return Outcome(lifecycle_id, LifecycleState.SUBMITTED, job_id=submission.job_id)
        waited = self._wait()([lifecycle_id], timeout_s=options.timeout_s, on_poll=options.on_poll)
        require_success(waited)
        record = self._publish()(lifecycle_id, replace=options.replace).record
        return Outcome(
            lifecycle_id, LifecycleState.PUBLISHED, job_id=submission.job_id, published=record
        )

    def _satisfies_policy(self, source: SourceRecord, profile: SiteProfile) -> bool:
        policy = profile.policy
        if policy is None or not policy.require_signature:
            return True
        if self._check_signature is None:
            return False
        return self._check_signature().satisfies(source.signed_by, profile)

    def _from_store(
        self, request: Request, profile: SiteProfile, *, replace: bool
    ) -> Outcome | Request:
        """The store's answer to an import, or the request to run: the import itself, or an
        inspection of the stored artifact when the store lacks facts for the role. A source
        outside the policy's registries is refused here as the plan would refuse it, and a
        stored record answers only when it satisfies the policy in force now (its signature
        by a key still trusted); otherwise the import runs, and checks the registry's
        signatures itself."""
        require_allowed_source(parse_reference(request.source), profile.policy)
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
        )
