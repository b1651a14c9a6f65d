"""The composition root: every adapter is chosen and wired here, and only here."""

from __future__ import annotations

import os
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from dependency_injector import containers, providers

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
from slurm_image.application.catalog import Catalog, Maintain
from slurm_image.application.observe import Observe
from slurm_image.application.prepare import PlanLifecycle, Prepare
from slurm_image.application.publish import Publish
from slurm_image.application.submit import Submit
from slurm_image.application.wait import Wait
from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidProfile
from slurm_image.domain.profile import SiteProfile
from slurm_image.entrypoints.runtime_files import load_runtime_files
from slurm_image.ports.submitter import BatchSubmitter

SUBMITTER_GROUP = "slurm_image.submitters"


class Container(containers.DeclarativeContainer):
    """Builds use cases from the validated site profile (``config`` holds its plain values)."""

    config = providers.Configuration(strict=True)

    clock = providers.Singleton(SystemClock)
    runtime_files = providers.Singleton(load_runtime_files)
    hasher = providers.Singleton(Sha256Hasher)
    credentials_file = providers.Singleton(LocalCredentialsFile)
    workspace = providers.Singleton(LocalWorkspace, root=config.workspace_root)
    submitter = providers.Selector(
        config.submitter.kind,
        fake=providers.Singleton(FakeSubmitter),
        sbatch=providers.Singleton(
            SbatchSubmitter,
            sbatch=config.submitter.sbatch.sbatch,
            timeout_s=config.submitter.sbatch.timeout_s,
        ),
        rest=providers.Singleton(
            RestSubmitter,
            url=config.submitter.rest.url,
            user=config.submitter.rest.user,
            token_file=config.submitter.rest.token_file,
            token_env=config.submitter.rest.token_env,
            api_version=config.submitter.rest.api_version,
            timeout_s=config.submitter.rest.timeout_s,
        ),
    )

    plan_lifecycle = providers.Factory(
        PlanLifecycle, clock=clock, runtime=runtime_files, credentials=credentials_file
    )
    prepare = providers.Factory(
        Prepare,
        clock=clock,
        runtime=runtime_files,
        workspace=workspace,
        credentials=credentials_file,
    )
    submit = providers.Factory(Submit, workspace=workspace, submitter=submitter, clock=clock)
    observe = providers.Factory(Observe, workspace=workspace, submitter=submitter)
    cancel = providers.Factory(Cancel, workspace=workspace, submitter=submitter)

    # Publication and the catalog (design §8). The store is the workspace with publication's
    # operations; list/show need neither the scheduler nor the locks.
    lock_timeout_s = providers.Object(60.0)
    store = providers.Singleton(LocalStore, root=config.workspace_root)
    locks = providers.Singleton(FcntlLocks, store=store)
    wait = providers.Factory(Wait, observe=observe, clock=clock)
    publish = providers.Factory(
        Publish,
        store=store,
        locks=locks,
        observe=providers.Factory(Observe, workspace=store, submitter=submitter),
        clock=clock,
        lock_timeout_s=lock_timeout_s,
    )
    catalog = providers.Factory(
        Catalog, store=providers.Singleton(LocalStore.reader, root=config.workspace_root)
    )
    maintain = providers.Factory(
        Maintain,
        store=store,
        locks=locks,
        observe=providers.Factory(Observe, workspace=store, submitter=submitter),
        clock=clock,
        lock_timeout_s=lock_timeout_s,
    )


def register_site_submitters(container: Container, profile: SiteProfile | None) -> None:
    """Add the submitters sites register under the entry-point group ``slurm_image.submitters``.

    Each entry point names a factory ``make(settings) -> BatchSubmitter``; ``settings`` is the
    profile's ``[submitter.<name>]`` table. Built-in names cannot be replaced.
    """
    selector = container.submitter
    known = dict(selector.providers)
    settings = profile.submitter.site_settings if profile is not None else {}
    for entry in entry_points(group=SUBMITTER_GROUP):
        if entry.name in known:
            continue
        known[entry.name] = providers.Singleton(_load_site_submitter, entry, settings)
    selector.set_providers(**known)


def _load_site_submitter(entry: EntryPoint, settings: dict[str, Any]) -> BatchSubmitter:
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
