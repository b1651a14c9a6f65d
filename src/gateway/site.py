"""What the gateway calls, as it declares it: the verbs the command line calls
(``application.lifecycles_port``), and those only a server needs (the requester's own verbs, the
reads of the catalog's pages, a refusal recorded, the store settled). The composition root hands
the gateway the local use cases (``composition.api.Lifecycles``), which offer all of them."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from slurm_image.application.lifecycles_port import LifecyclesPort

if TYPE_CHECKING:
    from slurm_image.application.lifecycle import Outcome
    from slurm_image.application.logs import LogCursor
    from slurm_image.application.metrics import StoreMetrics
    from slurm_image.application.settle import Settled
    from slurm_image.application.wait import Progress
    from slurm_image.domain.by_name import StablePath
    from slurm_image.domain.credentials import RegistryCredentials
    from slurm_image.domain.errors import SlurmImageError
    from slurm_image.domain.history import HistoryRead
    from slurm_image.domain.listing import ListQuery, SummaryPage
    from slurm_image.domain.profile import SiteProfile
    from slurm_image.domain.published import PublishedAlias
    from slurm_image.domain.request import Operation, Request
    from slurm_image.domain.requester import Requester


class Reads(Protocol):
    """What the catalog's pages read, as one reader may see it; nothing here changes anything."""

    def catalog_show(self, name: str, *, arch: str | None = None) -> PublishedAlias: ...

    def catalog_list(self) -> list[PublishedAlias]: ...

    def catalog_page(self, query: ListQuery) -> SummaryPage: ...

    def catalog_entries(self, name: str) -> tuple[PublishedAlias, ...]: ...

    def history(self, name: str | None = None, *, since: datetime | None = None) -> HistoryRead: ...

    def queue(self) -> list[dict[str, object]]: ...


class SiteVerbs(LifecyclesPort, Protocol):
    """The verbs of the site's profile, the service account's or one requester's."""

    @property
    def profile(self) -> SiteProfile: ...

    @property
    def requester(self) -> Requester | None: ...

    def acting_for(self, requester: Requester, *, host: str) -> SiteVerbs: ...

    def for_anyone(self) -> Reads: ...

    def reading(self) -> Reads: ...

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
    ) -> Request: ...

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
    ) -> Outcome: ...

    def finish(self, lifecycle_id: str, request: Request, *, replace: bool = False) -> Outcome: ...

    def log_cursor(self, lifecycle_id: str, *, follow: bool = False) -> LogCursor: ...

    def stable_path(self, name: str, *, arch: str | None = None) -> StablePath: ...

    def metrics(self) -> StoreMetrics: ...

    def settle(self) -> Settled: ...

    def record_refusal(self, error: SlurmImageError, *, reason: str) -> None: ...
