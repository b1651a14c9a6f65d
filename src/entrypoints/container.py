"""The composition root: every adapter is chosen and wired here, and only here."""

from __future__ import annotations

from dependency_injector import containers, providers

from adapters.local_workspace import LocalWorkspace
from adapters.memory import FakeSubmitter
from adapters.sha256_hasher import Sha256Hasher
from adapters.system_clock import SystemClock
from application.prepare import PlanLifecycle, Prepare
from application.submit import Submit
from domain.errors import InvalidProfile
from domain.profile import SiteProfile
from entrypoints.runtime_files import load_runtime_files


class Container(containers.DeclarativeContainer):
    """Builds use cases from the validated site profile (``config`` holds its plain values)."""

    config = providers.Configuration(strict=True)

    clock = providers.Singleton(SystemClock)
    runtime_files = providers.Singleton(load_runtime_files)
    hasher = providers.Singleton(Sha256Hasher)
    workspace = providers.Singleton(LocalWorkspace, root=config.workspace_root)
    submitter = providers.Selector(
        config.submitter.kind,
        fake=providers.Singleton(FakeSubmitter),
    )

    plan_lifecycle = providers.Factory(PlanLifecycle, clock=clock, runtime=runtime_files)
    prepare = providers.Factory(Prepare, clock=clock, runtime=runtime_files, workspace=workspace)
    submit = providers.Factory(Submit, workspace=workspace, submitter=submitter, clock=clock)


def build_container(profile: SiteProfile | None = None) -> Container:
    """A container configured from ``profile`` (none: only what needs no profile works)."""
    container = Container()
    if profile is not None:
        container.config.from_dict(profile.model_dump(mode="json"))
    return container


def submitter_kinds(container: Container) -> list[str]:
    return sorted(container.submitter.providers)


def require_submitter(container: Container, profile: SiteProfile) -> None:
    """Refuse, before anything is created, a ``submitter.kind`` no adapter is registered for."""
    kinds = submitter_kinds(container)
    if profile.submitter.kind not in kinds:
        raise InvalidProfile(
            "submitter.kind",
            f"no submitter named {profile.submitter.kind!r} is available here"
            f" (available: {', '.join(kinds)})",
        )
