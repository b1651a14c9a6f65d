"""What the commands call, handed to the command line by the composition root
(``composition.command_api.CommandApi``) when ``slurm-image`` starts: the verbs
(``application.lifecycles_port``) of this machine's store or of a gateway, the catalog's and the
history's readers, and the few commands that need more than the verbs (``doctor``, ``metrics``,
``catalog --html``, ``serve``). The command line builds nothing itself; each command asks for
its part when it runs, so that it loads only its own side (tests/cli/test_lazy_imports.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from slurm_image.application.doctor import DoctorReport
    from slurm_image.application.lifecycles_port import LifecyclesPort
    from slurm_image.application.metrics import StoreMetrics
    from slurm_image.application.read_history import FollowHistory
    from slurm_image.cli.arguments import Options
    from slurm_image.domain.by_name import StablePath
    from slurm_image.domain.credentials import RegistryCredentials
    from slurm_image.domain.history import HistoryRead
    from slurm_image.domain.listing import ListQuery, SummaryPage
    from slurm_image.domain.published import PublishedAlias


class Catalog(Protocol):
    """The catalog's reads of ``show``, ``path`` and ``list``."""

    def show(self, name: str, *, arch: str | None = None) -> PublishedAlias: ...

    def stable_path(self, name: str, *, arch: str | None = None) -> StablePath: ...

    def page(self, query: ListQuery) -> SummaryPage: ...


class History(Protocol):
    def __call__(self, name: str | None, *, since: datetime | None = None) -> HistoryRead: ...


class Exported(Protocol):
    """The pages ``catalog --html DIR`` wrote."""

    @property
    def directory(self) -> str: ...

    @property
    def pages(self) -> list[str]: ...

    @property
    def removed(self) -> list[str]: ...


@dataclass(frozen=True)
class Serving:
    """How ``serve`` was asked to run (its options, defaults applied)."""

    listen: Sequence[str]
    tls_cert: str | None
    tls_key: str | None
    munge_socket: str
    replay_file: str
    workers: int


class Services(Protocol):
    def gateway_url(self, options: Options) -> str | None:
        """The gateway the command asks, or None for this machine's store."""
        ...

    def lifecycles(self, options: Options) -> LifecyclesPort: ...

    def catalog_reader(self, options: Options) -> Catalog: ...

    def history_reader(self, options: Options) -> History: ...

    def history_follower(self, options: Options) -> FollowHistory: ...

    def own_credentials(self, options: Options, registry: str) -> RegistryCredentials | None: ...

    def export_catalog(self, options: Options, directory: str) -> Exported: ...

    def store_metrics(self, options: Options) -> StoreMetrics: ...

    def diagnose(self, options: Options, timeout_s: float) -> DoctorReport: ...

    def serve(self, options: Options, serving: Serving) -> None: ...


_installed: list[Services] = []


def install(services: Services) -> None:
    """What the commands of this process call from now on (``composition.main``)."""
    _installed[:] = [services]


def services() -> Services:
    if not _installed:
        raise RuntimeError("the command line runs from slurm_image.composition.main")
    return _installed[0]


def gateway_url(options: Options) -> str | None:
    return services().gateway_url(options)


def lifecycles(options: Options) -> LifecyclesPort:
    return services().lifecycles(options)


def catalog_reader(options: Options) -> Catalog:
    return services().catalog_reader(options)


def history_reader(options: Options) -> History:
    return services().history_reader(options)


def history_follower(options: Options) -> FollowHistory:
    return services().history_follower(options)


def own_credentials(options: Options, registry: str) -> RegistryCredentials | None:
    return services().own_credentials(options, registry)
