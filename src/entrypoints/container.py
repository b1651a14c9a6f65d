"""The composition root: every adapter is chosen and wired here, and only here."""

from __future__ import annotations

from dependency_injector import containers, providers

from adapters.system_clock import SystemClock
from application.prepare import PlanLifecycle
from entrypoints.runtime_files import load_runtime_files


class Container(containers.DeclarativeContainer):
    """Builds use cases from the validated site profile (``config`` holds its plain values)."""

    config = providers.Configuration(strict=True)

    clock = providers.Singleton(SystemClock)
    runtime_files = providers.Singleton(load_runtime_files)

    plan_lifecycle = providers.Factory(PlanLifecycle, clock=clock, runtime=runtime_files)
