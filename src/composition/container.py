"""The composition root: every adapter is chosen and wired here, and only here."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slurm_image.composition.lean_imports import without_web_framework

with without_web_framework():
    from dependency_injector import containers, providers

from slurm_image.composition import factories as make
from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidProfile

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from slurm_image.application.history import Actor
    from slurm_image.domain.profile import SiteProfile
    from slurm_image.domain.requester import Requester
    from slurm_image.ports.submitter import BatchSubmitter

SUBMITTER_GROUP = "slurm_image.submitters"

# Every provider builds through a function of composition.factories that imports its adapter or
# use case when it is first called: a command loads only what it uses (no HTTP client unless
# kind = "rest"), while this container stays the one place where everything is wired.


def _submitter_ready(container: Container, profile: SiteProfile) -> None:
    require_submitter(container, profile)


class Container(containers.DeclarativeContainer):
    """Builds use cases from the validated site profile (``config`` holds its plain values;
    ``profile`` the model itself, set by ``build_container``)."""

    __self__ = providers.Self()
    config = providers.Configuration(strict=True)
    profile: providers.Object[SiteProfile | None] = providers.Object(None)

    clock = providers.Singleton(make.clock)
    runtime_files = providers.Singleton(make.runtime_files)
    credentials_file = providers.Singleton(make.credentials_file)
    workspace = providers.Singleton(make.workspace, root=config.workspace_root)
    submitter = providers.Selector(
        config.submitter.kind,
        fake=providers.Singleton(make.fake_submitter),
        sbatch=providers.Singleton(
            make.sbatch_submitter,
            sbatch=config.submitter.sbatch.sbatch,
            timeout_s=config.submitter.sbatch.timeout_s,
        ),
        rest=providers.Singleton(
            make.rest_submitter,
            url=config.submitter.rest.url,
            user=config.submitter.rest.user,
            token_file=config.submitter.rest.token_file,
            token_env=config.submitter.rest.token_env,
            api_version=config.submitter.rest.api_version,
            timeout_s=config.submitter.rest.timeout_s,
        ),
    )
    submitter_ready = providers.Callable(_submitter_ready, __self__, profile)

    home = providers.Callable(os.path.expanduser, "~")
    # Resolving tags and finding signatures (docs/design.md, "Resolving a tag", "Image policy
    # and signatures"): one registry client per process, so a Bearer token serves every
    # request of its repository while it lasts. The use cases get the signature check's
    # provider and build it only when a policy requires a signature.
    registry = providers.Singleton(make.registry)
    signatures = providers.Singleton(make.signatures, registry=registry)
    check_signature = providers.Factory(
        make.check_signature,
        signatures=signatures,
        registry=registry,
        clock=clock,
        credentials=credentials_file,
    )
    plan_lifecycle = providers.Factory(
        make.plan_lifecycle,
        clock=clock,
        runtime=runtime_files,
        credentials=credentials_file,
        home=home,
        check_signature=check_signature.provider,
    )
    prepare = providers.Factory(
        make.prepare,
        clock=clock,
        runtime=runtime_files,
        workspace=workspace,
        credentials=credentials_file,
        home=home,
        check_signature=check_signature.provider,
    )

    # Who may do what (docs/gateway.md): the [gateway] rules over the site's accounts, for the
    # account this process runs as, which owns the store and may do everything itself.
    accounts = providers.Singleton(make.accounts)
    gateway_settings = providers.Callable(make.gateway_settings, profile)

    # Publication and the catalog (docs/design.md, "Publication"). The store is the workspace with
    # publication's operations; list/show need neither the scheduler nor the locks.
    lock_timeout_s = providers.Object(60.0)
    store = providers.Singleton(make.store, root=config.workspace_root)
    locks = providers.Singleton(make.locks, store=store)

    # The store's history (docs/design.md, "History"): every change of what users get is
    # recorded by the use case that makes it, as this process's user on this host; a job that
    # ended without a result, by the first command that observes it (status, wait, publish).
    actor = providers.Singleton(make.actor)
    history = providers.Singleton(
        make.history, store=store, locks=locks, lock_timeout_s=lock_timeout_s
    )
    record_history = providers.Singleton(
        make.record_history, history=history, clock=clock, actor=actor
    )
    permissions = providers.Singleton(
        make.permissions, accounts=accounts, settings=gateway_settings, actor=actor
    )
    # The requester a front end acts for (``acting_for``); None: this process's own account,
    # which owns the store and may do everything.
    caller: providers.Object[Requester | None] = providers.Object(None)
    # A reader with no identity (``[gateway] public_catalog``; ``Lifecycles.for_anyone``): the
    # catalog, the history and the queue without anything private.
    anyone = providers.Object(False)
    access = providers.Singleton(make.access, permissions=permissions, caller=caller)
    sees = providers.Callable(make.sees, access=access, caller=caller, anyone=anyone)
    # One job for many requests of one image (docs/gateway.md, "Many users at once").
    orders = providers.Singleton(make.orders, store=store, clock=clock)
    # Who may know of a lifecycle by its id and change it: every use case taking an id asks.
    lifecycle_rights = providers.Factory(
        make.lifecycle_rights, workspace=workspace, access=access, sees=sees, orders=orders
    )
    submit = providers.Factory(
        make.submit, workspace=workspace, submitter=submitter, clock=clock, rights=lifecycle_rights
    )
    # A refusal of what was asked on the site's word (its policy, its keys, a registry's answer
    # that does not hold): the API records it with the exit code the command ends with.
    record_refusals = providers.Factory(make.record_refusals, record=record_history)

    observe = providers.Factory(
        make.noticing_observe,
        workspace=workspace,
        submitter=submitter,
        record=record_history,
        rights=lifecycle_rights,
    )
    logs = providers.Factory(
        make.logs, workspace=workspace, observe=observe, rights=lifecycle_rights
    )
    wait = providers.Factory(make.wait, observe=observe, clock=clock)
    publish = providers.Factory(
        make.publish,
        store=store,
        locks=locks,
        statuses=providers.Factory(
            make.noticing_observe, workspace=store, submitter=submitter, record=record_history
        ),
        clock=clock,
        lock_timeout_s=lock_timeout_s,
        history=record_history,
        permissions=permissions,
        orders=orders,
        rights=lifecycle_rights,
    )
    coalesce = providers.Factory(
        make.coalesce,
        orders=orders,
        locks=locks,
        statuses=observe,
        settings=gateway_settings,
        lock_timeout_s=lock_timeout_s,
    )
    settle = providers.Factory(
        make.settle, orders=orders, statuses=observe, publish=publish.provider
    )
    queue = providers.Factory(make.queue, orders=orders, statuses=observe, sees=sees)
    cancel = providers.Factory(
        make.cancel,
        workspace=workspace,
        submitter=submitter,
        history=record_history,
        access=access,
        coalesce=coalesce,
        rights=lifecycle_rights,
    )
    lifecycle = providers.Factory(
        make.lifecycle,
        prepare=prepare.provider,
        submit=submit.provider,
        wait=wait.provider,
        publish=publish.provider,
        require_submitter=submitter_ready.provider,
        check_signature=check_signature.provider,
        coalesce=coalesce.provider,
        permissions=permissions.provider,
        rights=lifecycle_rights.provider,
    )
    store_reader = providers.Singleton(make.store_reader, root=config.workspace_root)
    catalog = providers.Factory(make.catalog, store=store_reader, sees=sees)
    # What the process keeps of the alias files between requests (application.catalog_index).
    catalog_index = providers.Singleton(make.catalog_index, store=store_reader)
    catalog_reader = providers.Factory(
        make.catalog_reader, store=store_reader, sees=sees, index=catalog_index
    )
    history_reader = providers.Singleton(make.history, store=store_reader)
    read_history = providers.Factory(
        make.read_history,
        history=history_reader,
        hidden=providers.Callable(
            make.hidden_aliases, catalog_reader=catalog_reader, caller=caller, anyone=anyone
        ),
        unseen=providers.Callable(
            make.unseen_events, rights=lifecycle_rights, caller=caller, anyone=anyone
        ),
    )
    # The figures a site graphs (docs/operations.md, "Metrics"): the store and its history,
    # nothing of the scheduler; for the store's owner and the admins (they count what is private).
    metrics = providers.Factory(
        make.metrics, store=store_reader, history=history_reader, clock=clock, access=access
    )

    resolve_tag = providers.Factory(
        make.resolve_tag, registry=registry, clock=clock, credentials=credentials_file
    )
    outdated = providers.Factory(make.outdated, catalog=catalog, resolve=resolve_tag, clock=clock)
    maintain = providers.Factory(
        make.maintain,
        store=store,
        locks=locks,
        observe=providers.Factory(make.observe, workspace=store, submitter=submitter),
        clock=clock,
        lock_timeout_s=lock_timeout_s,
        history=record_history,
        access=access,
        rights=lifecycle_rights,
        release_grace=providers.Callable(make.release_grace, profile),
    )


SHARED = (
    "clock",
    "runtime_files",
    "credentials_file",
    "workspace",
    "submitter",
    "registry",
    "signatures",
    "accounts",
    "store",
    "locks",
    "history",
    "permissions",
    "orders",
    "store_reader",
    "catalog_index",
    "history_reader",
)
"""What every requester's container shares with the process's (``acting_for``): the adapters
and the store's state, built once."""


def build_shared(container: Container) -> None:
    """Build every shared instance now, in one thread: a gateway serves requests from many
    threads, and two first calls at once must not build two lock tables or two token
    caches."""
    for name in SHARED:
        getattr(container, name)()


def _sharing(parent: Container) -> Container:
    """A container of the same profile whose ``SHARED`` instances are the parent's own."""
    child = Container()
    child.config.override(parent.config)
    child.profile.override(parent.profile)
    for name in SHARED:
        getattr(child, name).override(getattr(parent, name))
    return child


def acting_for(parent: Container, actor: Actor, requester: Requester) -> Container:
    """A container whose use cases act for ``requester`` (a request through the gateway): the
    history names ``actor``, the rules are the requester's; everything in ``SHARED`` is the
    parent's own instance."""
    child = _sharing(parent)
    child.actor.override(providers.Object(actor))
    child.caller.override(providers.Object(requester))
    return child


def for_anyone(parent: Container) -> Container:
    """A container whose catalog, history and queue are what a reader with no identity may
    see (``domain.access.seen_by_anyone``); everything in ``SHARED`` is the parent's own."""
    child = _sharing(parent)
    child.anyone.override(providers.Object(True))
    return child


BUILT_IN_SUBMITTERS = frozenset(Container.submitter.providers)


def entry_points(*, group: str) -> Sequence[EntryPoint]:
    """The installed entry points of ``group`` (``importlib.metadata`` is loaded only here)."""
    from importlib.metadata import entry_points as installed

    return installed(group=group)


def register_site_submitters(container: Container, profile: SiteProfile | None) -> None:
    """Add the submitters sites register under the entry-point group ``slurm_image.submitters``.

    Each entry point names a factory ``make(settings) -> BatchSubmitter``; ``settings`` is the
    profile's ``[submitter.<name>]`` table. Built-in names cannot be replaced.
    """
    if profile is None or profile.submitter.kind in BUILT_IN_SUBMITTERS:
        return  # the installed packages' metadata is read only for a site's submitter
    known = dict(container.submitter.providers)
    settings = profile.submitter.site_settings
    for entry in entry_points(group=SUBMITTER_GROUP):
        if entry.name in known:
            continue
        known[entry.name] = providers.Singleton(_load_site_submitter, entry, settings)
    container.submitter.set_providers(**known)


def _load_site_submitter(entry: EntryPoint, settings: dict[str, Any]) -> BatchSubmitter:
    from slurm_image.ports.submitter import BatchSubmitter

    factory = entry.load()
    submitter = factory(settings)
    if not isinstance(submitter, BatchSubmitter):
        raise InvalidProfile(
            field="submitter.kind",
            rule=f"{entry.value} does not give a BatchSubmitter (ports.submitter)",
        )
    return submitter


def build_container(profile: SiteProfile | None = None) -> Container:
    """A container configured from ``profile`` (none: only what needs no profile works)."""
    container = Container()
    if profile is not None:
        container.config.from_dict(profile.model_dump(mode="json"))
        container.profile.set_provides(profile)
    register_site_submitters(container, profile)
    return container


def submitter_kinds(container: Container) -> list[str]:
    return sorted(container.submitter.providers)


def require_submitter(container: Container, profile: SiteProfile) -> None:
    """The one decision whether the profile's submitter can work here, made before anything is
    created: a ``submitter.kind`` no adapter is registered for, or a token file that is missing
    or not a private file (exit 2, a profile error); then the submitter's own preflight, where it
    has one (``ports.submitter.Preflight``; sbatch: a client that cannot be found, exit 3, as when
    submitting). No adapter's class is tested here. The container offers this decision as
    ``submitter_ready``."""
    kinds = submitter_kinds(container)
    if profile.submitter.kind not in kinds:
        raise InvalidProfile(
            field="submitter.kind",
            rule=f"no submitter named {profile.submitter.kind!r} is available here"
            f" (available: {', '.join(kinds)})",
        )
    token_file = profile.submitter.rest.token_file
    if profile.submitter.kind == "rest" and token_file is not None:
        field = "submitter.rest.token_file"
        try:
            status = Path(token_file).expanduser().stat()
        except OSError as error:
            raise InvalidProfile(field=field, rule=f"{token_file}: {error.strerror}") from None
        problem = paths.secret_file_problem(status.st_mode, status.st_uid, os.geteuid())
        if problem is not None:
            raise InvalidProfile(field=field, rule=f"{token_file} {problem}")
    from slurm_image.ports.submitter import Preflight

    submitter = container.submitter()
    if isinstance(submitter, Preflight):
        submitter.preflight()
