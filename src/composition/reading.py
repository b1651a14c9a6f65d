"""What the catalog's pages read (``Lifecycles.reading``, ``Lifecycles.for_anyone``)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from slurm_image.domain.architecture import check_architecture

if TYPE_CHECKING:
    from slurm_image.composition.container import Container
    from slurm_image.domain.history import HistoryRead
    from slurm_image.domain.listing import ListQuery, SummaryPage
    from slurm_image.domain.published import PublishedAlias


class Reading:
    """What the catalog's pages read (docs/gateway.md, "The catalog page"): the published
    aliases, the history and the lifecycles in flight, as one reader may see them (the rules are
    the container's: ``Lifecycles.acting_for``, ``Lifecycles.for_anyone``). Nothing here changes
    anything."""

    def __init__(self, container: Container) -> None:
        self._container = container

    def catalog_show(self, name: str, *, arch: str | None = None) -> PublishedAlias:
        if arch is not None:
            check_architecture(arch)
        return self._container.catalog_reader().show(name, arch=arch)

    def catalog_list(self) -> list[PublishedAlias]:
        return self._container.catalog_reader().list()

    def catalog_page(self, query: ListQuery) -> SummaryPage:
        return self._container.catalog_reader().page(query)

    def catalog_entries(self, name: str) -> tuple[PublishedAlias, ...]:
        """Every entry of ``name``, one per architecture."""
        return self._container.catalog_reader().every_entry(name)

    def history(self, name: str | None = None, *, since: datetime | None = None) -> HistoryRead:
        return self._container.read_history()(name, since=since)

    def queue(self) -> list[dict[str, object]]:
        return [queued.as_dict() for queued in self._container.queue()()]
