"""How each adapter and use case is built, one small function each, importing its module when
first called. The container's providers (``composition.container``) call these; so does the
catalog read of ``show`` and ``list`` (``composition.lookup``), which runs at every job launch
and so loads neither dependency-injector nor the model library."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datetime import timedelta

    from slurm_image.adapters.credentials_file import LocalCredentialsFile
    from slurm_image.adapters.fcntl_lock import FcntlLocks
    from slurm_image.adapters.local_history import LocalHistory
    from slurm_image.adapters.local_store import LocalStore
    from slurm_image.adapters.local_workspace import LocalWorkspace
    from slurm_image.adapters.memory import FakeSubmitter
    from slurm_image.adapters.oci_registry import HttpRegistry
    from slurm_image.adapters.registry_signatures import RegistrySignatures
    from slurm_image.adapters.sbatch import SbatchSubmitter
    from slurm_image.adapters.slurmrest import RestSubmitter
    from slurm_image.adapters.system_clock import SystemClock
    from slurm_image.application.cancel import Cancel
    from slurm_image.application.catalog import Catalog
    from slurm_image.application.catalog_index import CatalogIndex
    from slurm_image.application.catalog_reader import CatalogReader, Sees
    from slurm_image.application.coalesce import Coalesce
    from slurm_image.application.history import (
        Actor,
        NoticeJobEnds,
        RecordHistory,
        RecordRefusals,
    )
    from slurm_image.application.lifecycle import Lifecycle
    from slurm_image.application.lifecycle_rights import LifecycleRights
    from slurm_image.application.logs import Logs
    from slurm_image.application.maintain import Maintain
    from slurm_image.application.metrics import CollectMetrics
    from slurm_image.application.observe import Observe
    from slurm_image.application.orders import Orders
    from slurm_image.application.outdated import Outdated
    from slurm_image.application.permissions import Permissions
    from slurm_image.application.prepare import PlanLifecycle, Prepare
    from slurm_image.application.publish import Publish
    from slurm_image.application.queue import Queue
    from slurm_image.application.read_history import FollowHistory, ReadHistory, Unseen
    from slurm_image.application.resolve import ResolveTag
    from slurm_image.application.settle import Settle
    from slurm_image.application.signature_check import CheckSignature
    from slurm_image.application.submit import Submit
    from slurm_image.application.wait import Wait
    from slurm_image.domain.access import Access
    from slurm_image.domain.gateway_settings import GatewaySettings
    from slurm_image.domain.profile import SiteProfile
    from slurm_image.domain.requester import Requester
    from slurm_image.domain.runtime import RuntimeFiles
    from slurm_image.ports.accounts import Accounts
    from slurm_image.ports.history import History
    from slurm_image.ports.lock import Locks
    from slurm_image.ports.registry import Registry
    from slurm_image.ports.workspace import Workspace


def runtime_files() -> RuntimeFiles:
    from slurm_image.composition.runtime_files import load_runtime_files

    return load_runtime_files()


def clock() -> SystemClock:

    from slurm_image.adapters.system_clock import SystemClock

    return SystemClock()


def credentials_file() -> LocalCredentialsFile:
    from slurm_image.adapters.credentials_file import LocalCredentialsFile

    return LocalCredentialsFile()


def workspace(root: str) -> LocalWorkspace:
    from slurm_image.adapters.local_workspace import LocalWorkspace

    return LocalWorkspace(root=root)


def store(root: str) -> LocalStore:
    from slurm_image.adapters.local_store import LocalStore

    return LocalStore(root=root)


def store_reader(root: str) -> LocalStore:
    from slurm_image.adapters.local_store import LocalStore

    return LocalStore.reader(root=root)


def locks(store: LocalStore) -> FcntlLocks:
    from slurm_image.adapters.fcntl_lock import FcntlLocks

    return FcntlLocks(store=store)


def history(
    store: LocalStore, locks: Locks | None = None, lock_timeout_s: float = 60.0
) -> LocalHistory:
    """The store's history; without ``locks``, for reading only (the store's reader)."""
    from slurm_image.adapters.local_history import LocalHistory

    return LocalHistory(store, locks, lock_timeout_s=lock_timeout_s)


def actor() -> Actor:
    """Who runs this process, as the history records it: the account's name (its passwd
    entry; the uid when it has none), uid and host."""
    import os
    import pwd
    import socket

    from slurm_image.application.history import Actor

    uid = os.getuid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    return Actor(user=user, uid=uid, host=socket.gethostname())


def record_history(**wiring: Any) -> RecordHistory:
    from slurm_image.application.history import RecordHistory

    return RecordHistory(**wiring)


def record_refusals(**wiring: Any) -> RecordRefusals:
    from slurm_image.application.history import RecordRefusals

    return RecordRefusals(**wiring)


def read_history(
    history: History,
    hidden: Callable[[str], bool] | None = None,
    unseen: Unseen | None = None,
) -> ReadHistory:
    from slurm_image.application.read_history import ReadHistory

    return ReadHistory(history, hidden, unseen)


def hidden_aliases(
    catalog_reader: CatalogReader, caller: Requester | None, anyone: bool = False
) -> Callable[[str], bool] | None:
    """For a requester, or a reader with no identity (``anyone``), whether an alias is one they
    may not see (its history is then not theirs to read); None for this process's own account."""
    return catalog_reader.hidden if caller is not None or anyone else None


def unseen_events(
    rights: LifecycleRights, caller: Requester | None, anyone: bool = False
) -> Unseen | None:
    """For a requester, or a reader with no identity (``anyone``), whether an event is one of a
    private lifecycle or alias they may not know of; None for this process's own account."""
    return rights.hides if caller is not None or anyone else None


def follow_history(history: History) -> FollowHistory:
    from slurm_image.application.read_history import FollowHistory

    return FollowHistory(history)


def noticing_observe(workspace: Workspace, record: RecordHistory, **wiring: Any) -> NoticeJobEnds:
    """``Observe`` that records a job ended without a result in the history, once."""
    from slurm_image.application.history import NoticeJobEnds

    return NoticeJobEnds(observe(workspace=workspace, **wiring), workspace, record)


def registry() -> HttpRegistry:
    from slurm_image.adapters.oci_registry import HttpRegistry

    return HttpRegistry()


def signatures(registry: Registry) -> RegistrySignatures:
    from slurm_image.adapters.registry_signatures import RegistrySignatures

    return RegistrySignatures(registry)


def check_signature(**wiring: Any) -> CheckSignature:
    from slurm_image.application.signature_check import CheckSignature

    return CheckSignature(**wiring)


def fake_submitter() -> FakeSubmitter:
    from slurm_image.adapters.memory import FakeSubmitter

    return FakeSubmitter()


def sbatch_submitter(**settings: Any) -> SbatchSubmitter:
    from slurm_image.adapters.sbatch import SbatchSubmitter

    return SbatchSubmitter(**settings)


def rest_submitter(**settings: Any) -> RestSubmitter:
    from slurm_image.adapters.slurmrest import RestSubmitter

    return RestSubmitter(**settings)


def plan_lifecycle(**wiring: Any) -> PlanLifecycle:
    from slurm_image.application.prepare import PlanLifecycle

    return PlanLifecycle(**wiring)


def prepare(**wiring: Any) -> Prepare:
    from slurm_image.application.prepare import Prepare

    return Prepare(**wiring)


def submit(**wiring: Any) -> Submit:
    from slurm_image.application.submit import Submit

    return Submit(**wiring)


def observe(**wiring: Any) -> Observe:
    from slurm_image.application.observe import Observe

    return Observe(**wiring)


def cancel(**wiring: Any) -> Cancel:
    from slurm_image.application.cancel import Cancel

    return Cancel(**wiring)


def wait(**wiring: Any) -> Wait:
    from slurm_image.application.wait import Wait

    observe = wiring.pop("observe")
    return Wait(observe=observe, progress=observe.with_progress, **wiring)


def logs(**wiring: Any) -> Logs:
    from slurm_image.adapters.local_log_files import LocalLogFiles
    from slurm_image.application.logs import Logs

    return Logs(files=LocalLogFiles(), **wiring)


def publish(**wiring: Any) -> Publish:
    from slurm_image.application.publish import Publish

    return Publish(**wiring)


def catalog(**wiring: Any) -> Catalog:
    from slurm_image.application.catalog import Catalog

    return Catalog(**wiring)


def maintain(**wiring: Any) -> Maintain:
    from slurm_image.application.maintain import Maintain

    return Maintain(**wiring)


def catalog_index(store: LocalStore) -> CatalogIndex:
    from slurm_image.application.catalog_index import CatalogIndex

    return CatalogIndex(store)


def catalog_reader(
    store: LocalStore, sees: Sees | None = None, index: CatalogIndex | None = None
) -> CatalogReader:
    from slurm_image.application.catalog_reader import CatalogReader

    return CatalogReader(store, sees, index)


def lifecycle(**wiring: Any) -> Lifecycle:
    from slurm_image.application.lifecycle import Lifecycle

    return Lifecycle(**wiring)


def resolve_tag(**wiring: Any) -> ResolveTag:
    from slurm_image.application.resolve import ResolveTag

    return ResolveTag(**wiring)


def outdated(**wiring: Any) -> Outdated:
    from slurm_image.application.outdated import Outdated

    return Outdated(**wiring)


def metrics(**wiring: Any) -> CollectMetrics:
    from slurm_image.application.metrics import CollectMetrics

    return CollectMetrics(**wiring)


def accounts() -> Accounts:
    from slurm_image.adapters.system_accounts import SystemAccounts

    return SystemAccounts()


def gateway_settings(profile: SiteProfile | None) -> GatewaySettings:
    from slurm_image.domain.gateway_settings import GatewaySettings

    return GatewaySettings() if profile is None else profile.gateway_settings


def release_grace(profile: SiteProfile | None) -> timedelta:
    from slurm_image.domain.by_name import DEFAULT_RELEASE_GRACE

    return DEFAULT_RELEASE_GRACE if profile is None else profile.release_grace


def permissions(accounts: Accounts, settings: GatewaySettings, actor: Actor) -> Permissions:
    """The rules of who may do what on the store, for the account this process runs as."""
    from slurm_image.application.permissions import Permissions

    return Permissions(accounts, settings, service_uid=actor.uid, service_user=actor.user)


def orders(**wiring: Any) -> Orders:
    from slurm_image.application.orders import Orders

    return Orders(**wiring)


def coalesce(**wiring: Any) -> Coalesce:
    from slurm_image.application.coalesce import Coalesce

    return Coalesce(**wiring)


def access(permissions: Permissions, caller: Requester | None) -> Access:
    """The rules for the requester a use case acts for (None: this process's own account)."""
    return permissions.of(caller)


def sees(access: Access, caller: Requester | None, anyone: bool = False) -> Sees | None:
    """The rule for private aliases when acting for a requester, or for a reader with no
    identity (``anyone``: ``access.seen_by_anyone``); None for this process's own account,
    which reads what the store's files let it read."""
    if anyone:
        from slurm_image.domain.access import seen_by_anyone

        return seen_by_anyone
    return access.sees if caller is not None else None


def lifecycle_rights(**wiring: Any) -> LifecycleRights:
    from slurm_image.application.lifecycle_rights import LifecycleRights

    return LifecycleRights(**wiring)


def settle(**wiring: Any) -> Settle:
    from slurm_image.application.settle import Settle

    return Settle(**wiring)


def queue(**wiring: Any) -> Queue:
    from slurm_image.application.queue import Queue

    return Queue(**wiring)
