"""The Python API: ``Lifecycles`` drives image lifecycles for programs, as the CLI does.

Built from the same container as the CLI (which is a thin layer over this class), it returns
typed records and raises the same typed errors; ``exit_code_for(error)`` in
``entrypoints.errors`` gives the CLI's exit code of any of them.

    from slurm_image import Lifecycles

    lifecycles = Lifecycles.from_profile("/etc/slurm-image/site.toml")
    outcome = lifecycles.import_image(REFERENCE, name="torch", role="client", wait=True)
    image = lifecycles.resolve("torch")          # an AliasRecord: path, sqsh_sha256, facts
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from slurm_image.entrypoints.container import Container, build_container, require_submitter
from slurm_image.entrypoints.profile_loader import load_profile, profile_path

if TYPE_CHECKING:
    # The use cases are imported by the container's providers when a method first needs one:
    # resolving an alias loads nothing of the scheduler's side.
    from slurm_image.application.maintain import Removed
    from slurm_image.application.prepare import PlannedLifecycle, PreparedLifecycle
    from slurm_image.application.status import LifecycleStatus
    from slurm_image.application.submit import Submission
    from slurm_image.application.wait import Progress, WaitResult
    from slurm_image.domain.profile import ProfileSelection, SiteProfile
    from slurm_image.domain.publication import AliasRecord
    from slurm_image.domain.request import Operation, Request


def make_request(operation: Operation, *, name: str, role: str, source: str) -> Request:
    """``domain.request.make_request``, imported when a lifecycle is first asked for."""
    from slurm_image.domain.request import make_request as make

    return make(operation, name=name, role=role, source=source)


log = logging.getLogger(__name__)

STAGED = "STAGED"
SUBMITTED = "SUBMITTED"
PUBLISHED = "PUBLISHED"


@dataclass(frozen=True)
class Outcome:
    """Where one ``import_image``/``inspect_image`` call ended.

    ``state``: ``STAGED`` (not submitted), ``SUBMITTED``, or ``PUBLISHED`` (``published`` holds
    the record; ``from_store`` when no job ran because the store had the answer).
    """

    lifecycle_id: str
    state: str
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


class Lifecycles:
    """Every verb of the product for one site profile (see the module docstring)."""

    def __init__(
        self,
        profile: SiteProfile,
        selection: ProfileSelection,
        container: Container | None = None,
    ) -> None:
        self.profile = profile
        self.selection = selection
        self.container = container if container is not None else build_container(profile)

    @classmethod
    def from_profile(
        cls,
        path: str | None = None,
        *,
        cluster: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Lifecycles:
        """Load the profile as the CLI does: ``path``, else ``$SLURM_IMAGE_PROFILE``, else
        ``./slurm-image.toml``; ``SLURM_IMAGE_*`` overrides from ``environ`` (default: the
        process environment). Raises ``InvalidProfile`` naming the field and the rule."""
        env = os.environ if environ is None else environ
        profile, selection = load_profile(profile_path(path, env), cluster=cluster)
        return cls(profile, selection)

    # -- lifecycles ----------------------------------------------------------------------

    def plan(self, operation: Operation, source: str, *, name: str, role: str) -> PlannedLifecycle:
        """The plan and script, creating nothing (``--dry-run``)."""
        request = make_request(operation, name=name, role=role, source=source)
        return self.container.plan_lifecycle()(request, self.profile, self.selection)

    def import_image(
        self,
        source: str,
        *,
        name: str,
        role: str,
        submit: bool = True,
        wait: bool = False,
        timeout_s: float | None = None,
        replace: bool = False,
        force: bool = False,
        on_poll: Progress | None = None,
    ) -> Outcome:
        """Import a digest-pinned OCI reference (see ``run`` for the options)."""
        request = make_request("import_oci", name=name, role=role, source=source)
        return self.run(
            request,
            submit=submit,
            wait=wait,
            timeout_s=timeout_s,
            replace=replace,
            force=force,
            on_poll=on_poll,
        )

    def inspect_image(
        self,
        sqsh: str,
        *,
        name: str,
        role: str,
        submit: bool = True,
        wait: bool = False,
        timeout_s: float | None = None,
        replace: bool = False,
        on_poll: Progress | None = None,
    ) -> Outcome:
        """Inspect an existing ``.sqsh`` in place (see ``run`` for the options)."""
        request = make_request("inspect_sqsh", name=name, role=role, source=sqsh)
        return self.run(
            request, submit=submit, wait=wait, timeout_s=timeout_s, replace=replace, on_poll=on_poll
        )

    def run(
        self,
        request: Request,
        *,
        submit: bool = True,
        wait: bool = False,
        timeout_s: float | None = None,
        replace: bool = False,
        force: bool = False,
        on_poll: Progress | None = None,
    ) -> Outcome:
        """Stage, and (``submit``) submit; with ``wait``, wait and publish.

        An import whose source the store holds (artifact verified now) with facts for the role
        is answered from the store, no job, unless ``force``; with the artifact but no facts
        for the role, an inspection job of the stored artifact runs instead of an import.
        """
        if submit and request.operation == "import_oci" and not force:
            answered = self._from_store(request, replace)
            if isinstance(answered, Outcome):
                return answered
            request = answered
        prepared = self.stage(request)
        if not submit:
            return Outcome(prepared.lifecycle_id, STAGED, job_directory=prepared.job_directory)
        require_submitter(self.container, self.profile)
        try:
            submission = self.container.submit()(prepared)
        except Exception as error:
            error.add_note(
                f"lifecycle {prepared.lifecycle_id} stays staged in {prepared.job_directory};"
                f" retry with: slurm-image submit {prepared.lifecycle_id}"
            )
            raise
        if not wait:
            return Outcome(submission.lifecycle_id, SUBMITTED, job_id=submission.job_id)
        from slurm_image.application.wait import require_success

        require_success(self.wait([submission.lifecycle_id], timeout_s=timeout_s, on_poll=on_poll))
        record = self.publish(submission.lifecycle_id, replace=replace)
        return Outcome(
            submission.lifecycle_id, PUBLISHED, job_id=submission.job_id, published=record
        )

    def _from_store(self, request: Request, replace: bool) -> Outcome | Request:
        from slurm_image.domain.reference import parse_reference
        from slurm_image.domain.store_layout import StoreLayout

        publisher = self.container.publish()
        source = publisher.stored_source(parse_reference(request.source).digest)
        if source is None:
            return request
        if request.role in source.roles:
            publication = publisher.bind_stored(request, source, replace=replace)
            record = publication.record
            return Outcome(record.lifecycle_id, PUBLISHED, published=record, from_store=True)
        artifact = StoreLayout(self.profile.workspace_root).artifact(source.sqsh_sha256)
        log.info(
            "%s is in the store as %s without %s facts: inspecting the stored artifact",
            request.source,
            artifact,
            request.role,
        )
        return make_request("inspect_sqsh", name=request.name, role=request.role, source=artifact)

    def stage(self, request: Request) -> PreparedLifecycle:
        return self.container.prepare()(request, self.profile, self.selection)

    def submit(self, lifecycle_id: str) -> Submission:
        require_submitter(self.container, self.profile)
        return self.container.submit().staged(lifecycle_id)

    def status(self, lifecycle_ids: Sequence[str]) -> list[LifecycleStatus]:
        require_submitter(self.container, self.profile)
        return self.container.observe()(lifecycle_ids)

    def wait(
        self,
        lifecycle_ids: Sequence[str],
        *,
        timeout_s: float | None = None,
        on_poll: Progress | None = None,
    ) -> WaitResult:
        """Poll until every job is final or ``timeout_s`` elapsed; ``require_success`` (in
        ``application.wait``) turns a failure or timeout into the CLI's errors (4, 7)."""
        require_submitter(self.container, self.profile)
        return self.container.wait()(lifecycle_ids, timeout_s=timeout_s, on_poll=on_poll)

    def cancel(self, lifecycle_id: str) -> LifecycleStatus:
        require_submitter(self.container, self.profile)
        return self.container.cancel()(lifecycle_id)

    def publish(self, lifecycle_id: str, *, replace: bool = False) -> AliasRecord:
        require_submitter(self.container, self.profile)
        return self.container.publish()(lifecycle_id, replace=replace).record

    # -- the catalog ---------------------------------------------------------------------

    def resolve(self, name: str, *, verify: bool = False) -> AliasRecord:
        """The published record of ``name`` (``verify``: the artifact re-hashed first)."""
        catalog = self.container.catalog()
        return catalog.verify(name) if verify else catalog.show(name)

    def list_aliases(self) -> list[AliasRecord]:
        return self.container.catalog().list()

    def unregister(self, name: str) -> str:
        return self.container.maintain().unregister(name)

    def cleanup(self, lifecycle_id: str) -> str:
        require_submitter(self.container, self.profile)
        return self.container.maintain().cleanup(lifecycle_id)

    def gc(self, *, older_than: timedelta, dry_run: bool = False) -> list[Removed]:
        require_submitter(self.container, self.profile)
        return self.container.maintain().gc(older_than=older_than, dry_run=dry_run)
