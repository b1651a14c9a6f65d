"""The composition root: every adapter is chosen and wired here, and only here."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dependency_injector import containers, providers

from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidProfile

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from slurm_image.adapters.credentials_file import LocalCredentialsFile
    from slurm_image.adapters.fcntl_lock import FcntlLocks
    from slurm_image.adapters.local_store import LocalStore
    from slurm_image.adapters.local_workspace import LocalWorkspace
    from slurm_image.adapters.memory import FakeSubmitter
    from slurm_image.adapters.sbatch import SbatchSubmitter
    from slurm_image.adapters.sha256_hasher import Sha256Hasher
    from slurm_image.adapters.slurmrest import RestSubmitter
    from slurm_image.adapters.system_clock import SystemClock
    from slurm_image.application.cancel import Cancel
    from slurm_image.application.catalog import Catalog
    from slurm_image.application.maintain import Maintain
    from slurm_image.application.observe import Observe
    from slurm_image.application.prepare import PlanLifecycle, Prepare
    from slurm_image.application.publish import Publish
    from slurm_image.application.submit import Submit
    from slurm_image.application.wait import Wait
    from slurm_image.domain.profile import SiteProfile
    from slurm_image.domain.runtime import RuntimeFiles
    from slurm_image.ports.submitter import BatchSubmitter

SUBMITTER_GROUP = "slurm_image.submitters"

# Every provider below builds through a small function that imports its adapter or use case
# when it is first called: a command loads only what it uses (no HTTP client unless
# kind = "rest", nothing of the scheduler for show, list or --help), while this container stays
# the one place where everything is chosen and wired.


def _runtime_files() -> RuntimeFiles:
    from slurm_image.entrypoints.runtime_files import load_runtime_files

    return load_runtime_files()


def _clock() -> SystemClock:
    from slurm_image.adapters.system_clock import SystemClock

    return SystemClock()


def _hasher() -> Sha256Hasher:
    from slurm_image.adapters.sha256_hasher import Sha256Hasher

    return Sha256Hasher()


def _credentials_file() -> LocalCredentialsFile:
    from slurm_image.adapters.credentials_file import LocalCredentialsFile

    return LocalCredentialsFile()


def _workspace(root: str) -> LocalWorkspace:
    from slurm_image.adapters.local_workspace import LocalWorkspace

    return LocalWorkspace(root=root)


def _store(root: str) -> LocalStore:
    from slurm_image.adapters.local_store import LocalStore

    return LocalStore(root=root)


def _store_reader(root: str) -> LocalStore:
    from slurm_image.adapters.local_store import LocalStore

    return LocalStore.reader(root=root)


def _locks(store: LocalStore) -> FcntlLocks:
    from slurm_image.adapters.fcntl_lock import FcntlLocks

    return FcntlLocks(store=store)


def _fake_submitter() -> FakeSubmitter:
    from slurm_image.adapters.memory import FakeSubmitter

    return FakeSubmitter()


def _sbatch_submitter(**settings: Any) -> SbatchSubmitter:
    from slurm_image.adapters.sbatch import SbatchSubmitter

    return SbatchSubmitter(**settings)


def _rest_submitter(**settings: Any) -> RestSubmitter:
    from slurm_image.adapters.slurmrest import RestSubmitter

    return RestSubmitter(**settings)


def _plan_lifecycle(**wiring: Any) -> PlanLifecycle:
    from slurm_image.application.prepare import PlanLifecycle

    return PlanLifecycle(**wiring)


def _prepare(**wiring: Any) -> Prepare:
    from slurm_image.application.prepare import Prepare

    return Prepare(**wiring)


def _submit(**wiring: Any) -> Submit:
    from slurm_image.application.submit import Submit

    return Submit(**wiring)


def _observe(**wiring: Any) -> Observe:
    from slurm_image.application.observe import Observe

    return Observe(**wiring)


def _cancel(**wiring: Any) -> Cancel:
    from slurm_image.application.cancel import Cancel

    return Cancel(**wiring)


def _wait(**wiring: Any) -> Wait:
    from slurm_image.application.wait import Wait

    return Wait(**wiring)


def _publish(**wiring: Any) -> Publish:
    from slurm_image.application.publish import Publish

    return Publish(**wiring)


def _catalog(**wiring: Any) -> Catalog:
    from slurm_image.application.catalog import Catalog

    return Catalog(**wiring)


def _maintain(**wiring: Any) -> Maintain:
    from slurm_image.application.maintain import Maintain

    return Maintain(**wiring)


class Container(containers.DeclarativeContainer):
    """Builds use cases from the validated site profile (``config`` holds its plain values)."""

    config = providers.Configuration(strict=True)

    clock = providers.Singleton(_clock)
    runtime_files = providers.Singleton(_runtime_files)
    hasher = providers.Singleton(_hasher)
    credentials_file = providers.Singleton(_credentials_file)
    workspace = providers.Singleton(_workspace, root=config.workspace_root)
    submitter = providers.Selector(
        config.submitter.kind,
        fake=providers.Singleton(_fake_submitter),
        sbatch=providers.Singleton(
            _sbatch_submitter,
            sbatch=config.submitter.sbatch.sbatch,
            timeout_s=config.submitter.sbatch.timeout_s,
        ),
        rest=providers.Singleton(
            _rest_submitter,
            url=config.submitter.rest.url,
            user=config.submitter.rest.user,
            token_file=config.submitter.rest.token_file,
            token_env=config.submitter.rest.token_env,
            api_version=config.submitter.rest.api_version,
            timeout_s=config.submitter.rest.timeout_s,
        ),
    )

    plan_lifecycle = providers.Factory(
        _plan_lifecycle, clock=clock, runtime=runtime_files, credentials=credentials_file
    )
    prepare = providers.Factory(
        _prepare,
        clock=clock,
        runtime=runtime_files,
        workspace=workspace,
        credentials=credentials_file,
    )
    submit = providers.Factory(_submit, workspace=workspace, submitter=submitter, clock=clock)
    observe = providers.Factory(_observe, workspace=workspace, submitter=submitter)
    cancel = providers.Factory(_cancel, workspace=workspace, submitter=submitter)

    # Publication and the catalog (design §8). The store is the workspace with publication's
    # operations; list/show need neither the scheduler nor the locks.
    lock_timeout_s = providers.Object(60.0)
    store = providers.Singleton(_store, root=config.workspace_root)
    locks = providers.Singleton(_locks, store=store)
    wait = providers.Factory(_wait, observe=observe, clock=clock)
    publish = providers.Factory(
        _publish,
        store=store,
        locks=locks,
        observe=providers.Factory(_observe, workspace=store, submitter=submitter),
        clock=clock,
        lock_timeout_s=lock_timeout_s,
    )
    catalog = providers.Factory(
        _catalog, store=providers.Singleton(_store_reader, root=config.workspace_root)
    )
    maintain = providers.Factory(
        _maintain,
        store=store,
        locks=locks,
        observe=providers.Factory(_observe, workspace=store, submitter=submitter),
        clock=clock,
        lock_timeout_s=lock_timeout_s,
    )


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
    selector = container.submitter
    known = dict(selector.providers)
    settings = profile.submitter.site_settings
    for entry in entry_points(group=SUBMITTER_GROUP):
        if entry.name in known:
            continue
        known[entry.name] = providers.Singleton(_load_site_submitter, entry, settings)
    selector.set_providers(**known)


def _load_site_submitter(entry: EntryPoint, settings: dict[str, Any]) -> BatchSubmitter:
    from slurm_image.ports.submitter import BatchSubmitter

    factory = entry.load()
    submitter = factory(settings)
    if not isinstance(submitter, BatchSubmitter):
        raise InvalidProfile(
            "submitter.kind", f"{entry.value} does not give a BatchSubmitter (ports.submitter)"
        )
    return submitter


def build_container(profile: SiteProfile | None = None) -> Container:
    """A container configured from ``profile`` (none: only what needs no profile works)."""
    container = Container()
    if profile is not None:
        container.config.from_dict(profile.model_dump(mode="json"))
    register_site_submitters(container, profile)
    return container


def submitter_kinds(container: Container) -> list[str]:
    return sorted(container.submitter.providers)


def require_submitter(container: Container, profile: SiteProfile) -> None:
    """Refuse, before anything is created, a submitter that cannot work: a ``submitter.kind``
    no adapter is registered for, or a token file that is missing or not a private file (exit
    2, a profile error); an sbatch client that cannot be found (exit 3, as when submitting)."""
    kinds = submitter_kinds(container)
    if profile.submitter.kind not in kinds:
        raise InvalidProfile(
            "submitter.kind",
            f"no submitter named {profile.submitter.kind!r} is available here"
            f" (available: {', '.join(kinds)})",
        )
    if profile.submitter.kind == "sbatch":
        from slurm_image.adapters.sbatch import SbatchSubmitter

        submitter = container.submitter()
        if isinstance(submitter, SbatchSubmitter):
            submitter.executable()
    token_file = profile.submitter.rest.token_file
    if profile.submitter.kind == "rest" and token_file is not None:
        field = "submitter.rest.token_file"
        try:
            status = Path(token_file).expanduser().stat()
        except OSError as error:
            raise InvalidProfile(field, f"{token_file}: {error.strerror}") from None
        problem = paths.secret_file_problem(status.st_mode, status.st_uid, os.geteuid())
        if problem is not None:
            raise InvalidProfile(field, f"{token_file} {problem}")
