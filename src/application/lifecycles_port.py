"""The verbs the command line calls, as one driving port: the local use cases
(``composition.api.Lifecycles``) and a gateway's client (``adapters.gateway_client``) both
implement it, with the same arguments, answers and errors
(tests/contract/test_lifecycles_contract.py); what is the same whichever answers is written here
once. Nothing of the use cases is imported at run time, so the command line may name the port
without loading one."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from slurm_image.application.lifecycle import Outcome
    from slurm_image.application.logs import Write
    from slurm_image.application.maintain import Removed
    from slurm_image.application.outdated import OutdatedEntry
    from slurm_image.application.prepare import PlannedLifecycle
    from slurm_image.application.resolve import Resolution
    from slurm_image.application.status import LifecycleStatus
    from slurm_image.application.submit import Submission
    from slurm_image.application.wait import Progress, WaitResult
    from slurm_image.domain.credentials import RegistryCredentials
    from slurm_image.domain.history import HistoryRead
    from slurm_image.domain.listing import ListQuery, SummaryPage
    from slurm_image.domain.publication import AliasRecord
    from slurm_image.domain.published import PublishedAlias
    from slurm_image.domain.request import Operation

RESOLVE_TIMEOUT_S = 60.0
"""How long resolving one tag may take (``application.resolve.DEFAULT_TIMEOUT_S``)."""


class LifecyclesPort(Protocol):
    """Every verb of the product the command line asks of one back end."""

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
    ) -> PlannedLifecycle: ...

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
    ) -> Outcome: ...

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
    ) -> Outcome: ...

    def submit(self, lifecycle_id: str) -> Submission: ...

    def status(self, lifecycle_ids: Sequence[str]) -> list[LifecycleStatus]: ...

    def wait(
        self,
        lifecycle_ids: Sequence[str],
        *,
        timeout_s: float | None = None,
        on_poll: Progress | None = None,
    ) -> WaitResult: ...

    def logs(self, lifecycle_id: str, write: Write, *, follow: bool = False) -> None: ...

    def cancel(self, lifecycle_id: str) -> LifecycleStatus: ...

    def publish(self, lifecycle_id: str, *, replace: bool = False) -> AliasRecord: ...

    def cleanup(self, lifecycle_id: str) -> str: ...

    def resolve_tag(
        self,
        reference: str,
        *,
        arch: str | None = None,
        timeout_s: float = RESOLVE_TIMEOUT_S,
        credentials: RegistryCredentials | None = None,
    ) -> Resolution: ...

    def outdated(
        self, names: Sequence[str] = (), *, timeout_s: float = RESOLVE_TIMEOUT_S
    ) -> list[OutdatedEntry]: ...

    def resolve(
        self, name: str, *, verify: bool = False, arch: str | None = None
    ) -> AliasRecord: ...

    def architectures(self, name: str) -> tuple[str | None, ...]: ...

    def catalog_show(self, name: str, *, arch: str | None = None) -> PublishedAlias: ...

    def catalog_page(self, query: ListQuery) -> SummaryPage: ...

    def catalog_summaries(self, query: ListQuery | None = None) -> list[dict[str, object]]:
        """``list``: every summary ``query`` selects (default: every alias), page after page."""
        from slurm_image.domain.listing import every_summary

        return every_summary(self.catalog_page, query)

    def history(self, name: str | None = None, *, since: datetime | None = None) -> HistoryRead: ...

    def unregister(self, name: str) -> str: ...

    def gc(self, *, older_than: timedelta, dry_run: bool = False) -> list[Removed]: ...

    def queue(self) -> list[dict[str, object]]: ...
