"""The Python API: ``Lifecycles`` drives image lifecycles for programs, as the CLI does.

Built from the same container as the CLI (which is a thin layer over this class), it returns
typed records and raises the same typed errors; ``exit_code_for(error)`` in
``wire.errors`` gives the CLI's exit code of any of them.

    from slurm_image import Lifecycles

    lifecycles = Lifecycles.from_profile("/etc/slurm-image/site.toml")
    outcome = lifecycles.import_image(REFERENCE, name="torch", role="client", wait=True)
    image = lifecycles.resolve("torch")          # an AliasRecord: path, sqsh_sha256, facts
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from slurm_image.application.lifecycles_port import RESOLVE_TIMEOUT_S, LifecyclesPort
from slurm_image.composition.container import Container, build_container
from slurm_image.composition.profile_loader import layer_cache_bound, load_profile, profile_path
from slurm_image.composition.reading import Reading
from slurm_image.domain.architecture import check_architecture

if TYPE_CHECKING:
    # The use cases are imported by the container's providers when a method first needs one:
    # resolving an alias loads nothing of the scheduler's side.
    from slurm_image.application.lifecycle import Outcome
    from slurm_image.application.logs import LogCursor, Write
    from slurm_image.application.maintain import Removed
    from slurm_image.application.metrics import StoreMetrics
    from slurm_image.application.outdated import OutdatedEntry
    from slurm_image.application.prepare import PlannedLifecycle, PreparedLifecycle
    from slurm_image.application.resolve import Resolution
    from slurm_image.application.settle import Settled
    from slurm_image.application.status import LifecycleStatus
    from slurm_image.application.submit import Submission
    from slurm_image.application.wait import Progress, WaitResult
    from slurm_image.domain.by_name import StablePath
    from slurm_image.domain.credentials import RegistryCredentials
    from slurm_image.domain.errors import SlurmImageError
    from slurm_image.domain.history import HistoryRead
    from slurm_image.domain.layer_cache import CacheBound
    from slurm_image.domain.listing import ListQuery, SummaryPage
    from slurm_image.domain.profile import ProfileSelection, SiteProfile
    from slurm_image.domain.publication import AliasRecord
    from slurm_image.domain.published import PublishedAlias
    from slurm_image.domain.request import Operation, Request
    from slurm_image.domain.requester import Requester
    from slurm_image.domain.resolution import ResolvedFrom


def make_request(
    operation: Operation,
    *,
    name: str,
    role: str,
    source: str,
    architecture: str | None,
    resolved_from: ResolvedFrom | None = None,
    unsigned_ok: bool = False,
    requester: Requester | None = None,
    group: str | None = None,
    private: bool = False,
) -> Request:
    """``domain.request.make_request``, imported when a lifecycle is first asked for."""
    from slurm_image.domain.request import make_request as make

    return make(
        operation,
        name=name,
        role=role,
        source=source,
        architecture=architecture,
        resolved_from=resolved_from,
        unsigned_ok=unsigned_ok,
        requester=requester,
        group=group,
        private=private,
    )


class Lifecycles(LifecyclesPort):
    """Every verb of the product for one site profile (see the module docstring)."""

    def __init__(
        self,
        profile: SiteProfile,
        selection: ProfileSelection,
        container: Container | None = None,
        requester: Requester | None = None,
    ) -> None:
        self.profile = profile
        self.selection = selection
        self.container = container if container is not None else build_container(profile)
        self.requester = requester
        """The account the verbs act for (a request through the gateway); None: this
        process's own, which owns the store."""

    def acting_for(self, requester: Requester, *, host: str) -> Lifecycles:
        """The same verbs, acting for ``requester`` (who asked the gateway from ``host``):
        their requests, records and history name the requester, and the rules of who may do
        what are the requester's (docs/gateway.md). Shares every adapter with this one."""
        from slurm_image.application.history import Actor
        from slurm_image.composition.container import acting_for

        actor = Actor(user=requester.user, uid=requester.uid, host=host)
        child = acting_for(self.container, actor, requester)
        return Lifecycles(self.profile, self.selection, child, requester)

    def for_anyone(self) -> Reading:
        """The reads a reader with no identity may make (``[gateway] public_catalog``, the
        catalog's static pages): every alias, event and lifecycle but the private ones
        (``domain.access.seen_by_anyone``), and no verb that changes anything."""
        from slurm_image.composition.container import for_anyone

        return Reading(for_anyone(self.container))

    def reading(self) -> Reading:
        """The reads of the catalog's pages, as these verbs' requester may see them."""
        return Reading(self.container)

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

    def _scheduler_side(self) -> None:
        """Refuse a submitter that cannot work here before a command that needs it
        (``composition.container.require_submitter``)."""
        self.container.submitter_ready()

    @contextmanager
    def _refusals_recorded(
        self, *, source: str | None = None, alias: str | None = None
    ) -> Iterator[None]:
        """Record in the store's history what the block refuses on the site's word (a source
        outside the policy, a signature refused, a registry's answer that lied: the error's
        ``refusal``), with the exit code the command line ends with; then let it go on. A
        ``--dry-run`` (``plan``) attempts nothing and records nothing."""
        try:
            yield
        except Exception as error:
            self._record_refusal(error, source=source, alias=alias)
            raise

    def _record_refusal(
        self, error: BaseException, *, source: str | None, alias: str | None
    ) -> None:
        """Record ``error`` when it is a refusal on the site's word (``_refusals_recorded``)."""
        from slurm_image.domain.errors import SlurmImageError

        if isinstance(error, SlurmImageError) and error.refusal is not None:
            from slurm_image.wire.errors import describe, exit_code_for

            self.container.record_refusals()(
                error,
                exit_code_for(error),
                reason=describe(error),
                source=source,
                alias=alias,
                requester=self.requester,
            )

    # -- lifecycles ----------------------------------------------------------------------

    def plan(
        self,
        operation: Operation,
        source: str,
        *,
        name: str,
        role: str,
        arch: str | None = None,
        resolve: bool = False,
        unsigned_ok: bool = False,
        group: str | None = None,
        credentials: RegistryCredentials | None = None,
    ) -> PlannedLifecycle:
        """The plan and script, creating nothing (``--dry-run``); ``resolve``: ``source`` is a
        tag, pinned first (``resolve_tag``); ``unsigned_ok``: an inspection let through under
        ``require_signature``; ``group`` and ``credentials`` as for ``import_image``."""
        request = self._request(
            operation,
            source,
            name=name,
            role=role,
            arch=arch,
            resolve=resolve,
            unsigned_ok=unsigned_ok,
            group=group,
            credentials=credentials,
        )
        return self.container.plan_lifecycle()(
            request, self.profile, self.selection, given_credentials=credentials
        )

    def request(
        self,
        operation: Operation,
        source: str,
        *,
        name: str,
        role: str,
        arch: str | None,
        resolve: bool,
        unsigned_ok: bool = False,
        group: str | None = None,
        credentials: RegistryCredentials | None = None,
    ) -> Request:
        """The request for ``source``, made by the requester these verbs act for; with
        ``resolve`` (imports only), the request for the pin the tag ``source`` resolves to now,
        recording where it came from. Name, role and architecture are checked before any
        registry is asked. With ``credentials`` (the requester's own), the request is private
        to ``group``. A refusal of the tag (outside the policy, a registry's answer that lied)
        is recorded in the store's history."""
        with self._refusals_recorded(source=source, alias=name):
            return self._request(
                operation,
                source,
                name=name,
                role=role,
                arch=arch,
                resolve=resolve,
                unsigned_ok=unsigned_ok,
                group=group,
                credentials=credentials,
            )

    def _request(
        self,
        operation: Operation,
        source: str,
        *,
        name: str,
        role: str,
        arch: str | None,
        resolve: bool,
        unsigned_ok: bool = False,
        group: str | None = None,
        credentials: RegistryCredentials | None = None,
    ) -> Request:
        resolved_from = None
        if resolve:
            from slurm_image.domain.errors import InvalidRequest
            from slurm_image.domain.request import check_fields

            if operation != "import_oci":
                raise InvalidRequest(
                    field="resolve", rule="resolves an import's tag: not for inspect"
                )
            check_fields(name=name, role=role, architecture=arch)
            resolution = self.container.resolve_tag()(
                source, self.profile, arch=arch, credentials=credentials
            )
            source, resolved_from = resolution.pinned, resolution.resolved_from
        return make_request(
            operation,
            name=name,
            role=role,
            source=source,
            architecture=arch,
            resolved_from=resolved_from,
            unsigned_ok=unsigned_ok,
            requester=self.requester,
            group=group,
            private=credentials is not None,
        )

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
        arch: str | None = None,
        resolve: bool = False,
        group: str | None = None,
        credentials: RegistryCredentials | None = None,
    ) -> Outcome:
        """Import a digest-pinned OCI reference for ``arch`` (x86_64, aarch64, ppc64le; None:
        the profile's ``[image_build] arch``, else the build node's). ``resolve``: ``source``
        is ``registry/repo:TAG``, resolved first and the pin imported exactly as if it had been
        given, the plan and the published entry recording the tag (``resolve_tag``).
        ``group``: the group the alias is shared with; ``credentials``: the requester's own
        entry for the source's registry (the import is then private to ``group``). See
        ``run`` for the other options."""
        request = self.request(
            "import_oci",
            source,
            name=name,
            role=role,
            arch=arch,
            resolve=resolve,
            group=group,
            credentials=credentials,
        )
        return self.run(
            request,
            submit=submit,
            wait=wait,
            timeout_s=timeout_s,
            replace=replace,
            force=force,
            on_poll=on_poll,
            credentials=credentials,
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
        arch: str | None = None,
        unsigned_ok: bool = False,
        group: str | None = None,
    ) -> Outcome:
        """Inspect an existing ``.sqsh`` in place; ``arch``: the architecture it must be (None:
        whatever it runs as); ``unsigned_ok``: inspect it although the profile's policy requires
        a signature (``inspect --unsigned-ok``). See ``run`` for the other options."""
        request = self.request(
            "inspect_sqsh",
            sqsh,
            name=name,
            role=role,
            arch=arch,
            resolve=False,
            unsigned_ok=unsigned_ok,
            group=group,
        )
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
        credentials: RegistryCredentials | None = None,
    ) -> Outcome:
        """Stage, and (``submit``) submit; with ``wait``, wait and publish. An import the store
        can answer runs no job unless ``force``; one of a source another lifecycle is importing
        joins it (``application.lifecycle``). A refusal on the site's word (its policy, its
        keys) is recorded in the store's history."""
        from slurm_image.application.lifecycle import LifecycleOptions

        options = LifecycleOptions(submit, wait, timeout_s, replace, force, on_poll)
        with self._refusals_recorded(source=request.source, alias=request.name):
            return self.container.lifecycle()(
                request, self.profile, self.selection, options, credentials=credentials
            )

    def finish(self, lifecycle_id: str, request: Request, *, replace: bool = False) -> Outcome:
        """Publish a lifecycle whose job succeeded, for ``request``: its own, or one that
        joined it (whose alias is bound to the same artifact once it is published)."""
        self._scheduler_side()
        return self.container.lifecycle().finish(lifecycle_id, request, replace=replace)

    def stage(self, request: Request) -> PreparedLifecycle:
        return self.container.prepare()(request, self.profile, self.selection)

    def submit(self, lifecycle_id: str) -> Submission:
        self._scheduler_side()
        return self.container.submit().staged(lifecycle_id)

    def status(self, lifecycle_ids: Sequence[str]) -> list[LifecycleStatus]:
        self._scheduler_side()
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
        self._scheduler_side()
        return self.container.wait()(lifecycle_ids, timeout_s=timeout_s, on_poll=on_poll)

    def logs(self, lifecycle_id: str, write: Write, *, follow: bool = False) -> None:
        """Hand the job's output and error logs to ``write(path, data)``; ``follow``: until
        the job is terminal (``application.logs``)."""
        self._scheduler_side()
        self.container.logs()(lifecycle_id, write, follow=follow)

    def log_cursor(self, lifecycle_id: str, *, follow: bool = False) -> LogCursor:
        """A reader of the job's logs that reads a pass at a time and waits for nothing
        (``application.logs.LogCursor``): for a front end that rests between passes itself."""
        self._scheduler_side()
        return self.container.logs().open(lifecycle_id, follow=follow)

    def cancel(self, lifecycle_id: str) -> LifecycleStatus:
        self._scheduler_side()
        with self._refusals_recorded():
            return self.container.cancel()(lifecycle_id)

    def publish(self, lifecycle_id: str, *, replace: bool = False) -> AliasRecord:
        self._scheduler_side()
        with self._refusals_recorded():
            return self.container.publish()(lifecycle_id, replace=replace).record

    # -- tags ----------------------------------------------------------------------------

    def resolve_tag(
        self,
        reference: str,
        *,
        arch: str | None = None,
        timeout_s: float = RESOLVE_TIMEOUT_S,
        credentials: RegistryCredentials | None = None,
    ) -> Resolution:
        """The pin ``registry/repo:TAG`` resolves to now, asked of the registry from here (no
        job), with the profile's credentials (or the requester's own, ``credentials``);
        ``arch``: also the manifest an import for it gets (``NoImageForArchitecture`` when the
        index has none). See ``application.resolve``. A refusal of the tag (outside the
        policy, a registry's answer that lied) is recorded in the store's history."""
        with self._refusals_recorded(source=reference):
            return self.container.resolve_tag()(
                reference, self.profile, arch=arch, timeout_s=timeout_s, credentials=credentials
            )

    def outdated(
        self, names: Sequence[str] = (), *, timeout_s: float = RESOLVE_TIMEOUT_S
    ) -> list[OutdatedEntry]:
        """Every published entry of ``names`` (default: every alias) with what its recorded
        tag resolves to now: current, moved, gone, unknown or failed
        (``application.outdated``). A tag refused (outside the policy, a registry's answer that
        lied) is recorded in the store's history once, naming its alias when one alone
        records it."""
        with self._refusals_recorded():
            entries = self.container.outdated()(self.profile, names, timeout_s=timeout_s)
        refused: dict[str, tuple[Exception, set[str]]] = {}
        for entry in entries:
            if entry.error is not None and entry.error.refusal is not None and entry.tag:
                refused.setdefault(entry.tag, (entry.error, set()))[1].add(entry.name)
        for tag, (error, aliases) in refused.items():
            alias = next(iter(aliases)) if len(aliases) == 1 else None
            self._record_refusal(error, source=tag, alias=alias)
        return entries

    # -- the catalog ---------------------------------------------------------------------

    def resolve(self, name: str, *, verify: bool = False, arch: str | None = None) -> AliasRecord:
        """The published entry of ``name`` for ``arch``, else for this machine's architecture
        (``verify``: the artifact re-hashed first). ``NoImageForArchitecture`` (exit 2) names
        the architectures the alias has when it has none for that one."""
        catalog = self.container.catalog()
        if arch is not None:
            check_architecture(arch)
        if verify:
            return catalog.verify(name, arch=arch)
        return catalog.show(name, arch=arch)

    def catalog_show(self, name: str, *, arch: str | None = None) -> PublishedAlias:
        """``show NAME`` as launchers read it: the entry for ``arch`` (else this machine's) as
        published, with every architecture the alias has and who it belongs to."""
        return self.reading().catalog_show(name, arch=arch)

    def catalog_list(self) -> list[PublishedAlias]:
        """Every entry of every alias the requester may see, as published (the catalog's
        pages)."""
        return self.reading().catalog_list()

    def catalog_page(self, query: ListQuery) -> SummaryPage:
        """One page of ``list``'s summaries of the aliases the requester may see
        (``domain.listing``)."""
        return self.reading().catalog_page(query)

    def queue(self) -> list[dict[str, object]]:
        """Every lifecycle in flight the requester may see, with the orders waiting on it and
        its progress counters (``application.queue``)."""
        return self.reading().queue()

    def open_store(self) -> None:
        """Ready to serve many requests at once (``slurm-image serve``): every shared adapter
        built (``container.build_shared``), and the store's directories made when missing, so
        that a gateway answers ``list`` and ``/metrics`` from its first moment."""
        from slurm_image.application.store_records import StoreRecords
        from slurm_image.composition.container import build_shared

        build_shared(self.container)
        StoreRecords(self.container.store()).prepare_directories()

    def settle(self) -> Settled:
        """Publish every lifecycle whose job succeeded and close what ended without a result
        (``application.settle``): what the gateway does when it starts and then regularly."""
        self._scheduler_side()
        return self.container.settle()()

    def stable_path(self, name: str, *, arch: str | None = None) -> StablePath:
        """``name``'s stable path as these verbs' requester may see it (``path NAME``)."""
        return self.container.catalog_reader().stable_path(name, arch=arch)

    def record_refusal(self, error: SlurmImageError, *, reason: str) -> None:
        """Record in the store's history a refusal no requester's verbs made (the gateway's
        of a request with no identity), ``reason`` saying what and from where."""
        from slurm_image.wire.errors import exit_code_for

        self.container.record_refusals()(
            error, exit_code_for(error), reason=reason, source=None, alias=None
        )

    def architectures(self, name: str) -> tuple[str | None, ...]:
        """The architectures ``name`` has an image for (None: published before they were
        recorded)."""
        return self.container.catalog().document(name).architectures

    def list_aliases(self) -> list[AliasRecord]:
        """Every entry of every alias, one per architecture."""
        return self.container.catalog().list()

    def history(self, name: str | None = None, *, since: datetime | None = None) -> HistoryRead:
        """The store's history, oldest first: every event (or those of the alias ``name``) at
        or after ``since`` (aware), and how many lines were no event
        (``application.read_history.ReadHistory``)."""
        return self.reading().history(name, since=since)

    def metrics(self) -> StoreMetrics:
        """The store's figures (``application.metrics``): aliases, artifacts, the layer cache,
        attempts, and the history's totals; nothing of the scheduler is asked."""
        return self.container.metrics()(
            layer_cache=self.layer_cache_bound(), store_name=self.profile.store_name
        )

    def unregister(self, name: str) -> str:
        with self._refusals_recorded(alias=name):
            return self.container.maintain().unregister(name)

    def cleanup(self, lifecycle_id: str) -> str:
        self._scheduler_side()
        with self._refusals_recorded():
            return self.container.maintain().cleanup(lifecycle_id)

    def gc(self, *, older_than: timedelta, dry_run: bool = False) -> list[Removed]:
        self._scheduler_side()
        with self._refusals_recorded():
            return self.container.maintain().gc(
                older_than=older_than, dry_run=dry_run, layer_cache=self.layer_cache_bound()
            )

    def layer_cache_bound(self) -> CacheBound | None:
        """The layer cache as this machine reaches it (README, "The layer cache"), and the
        bytes ``gc`` keeps it to; None when the profile turns it off."""
        return layer_cache_bound(self.profile)
