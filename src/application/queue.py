"""Who waits for what (docs/gateway.md, "Many users at once"; Shifter's ``queue``): every
lifecycle in flight the requester may see, its job's state, phase and progress counters, and every
order waiting on it."""

from __future__ import annotations

from dataclasses import dataclass

from slurm_image.application.catalog_reader import Sees
from slurm_image.application.orders import Orders
from slurm_image.application.status import LifecycleStatus, Statuses
from slurm_image.domain.errors import SlurmImageError
from slurm_image.domain.orders import OrderBook


@dataclass(frozen=True)
class Queued:
    """One lifecycle in flight: its book and its status (None when it could not be asked)."""

    book: OrderBook
    status: LifecycleStatus | None

    def as_dict(self) -> dict[str, object]:
        status = self.status
        progress = status.progress if status is not None else None
        return {
            "lifecycle_id": self.book.lifecycle_id,
            "source": self.book.first.request.source,
            "architecture": self.book.architecture,
            "role": self.book.first.request.role,
            "job_id": status.job_id if status is not None else None,
            "state": str(status.state) if status is not None else None,
            "phase": progress.phase if progress is not None else None,
            "progress": progress.counters() if progress is not None else None,
            "orders": [
                {
                    "alias": order.request.name,
                    "requester": order.request.requester.user if order.request.requester else None,
                    "ordered_at": order.ordered_at,
                }
                for order in self.book.orders
            ],
        }


class Queue:
    """The lifecycles in flight that ``sees`` lets the reader know of (None: all)."""

    def __init__(self, orders: Orders, statuses: Statuses, sees: Sees | None = None) -> None:
        self._orders = orders
        self._statuses = statuses
        self._sees = sees

    def __call__(self) -> list[Queued]:
        books = [
            book
            for book in self._orders.open_books()
            if self._sees is None or self._sees(book.ownership)
        ]
        found: list[Queued] = []
        for book in books:
            try:
                (status,) = self._statuses([book.lifecycle_id])
            except SlurmImageError:
                status = None
            found.append(Queued(book, status))
        return found
