"""Settle the store (docs/gateway.md, "A gateway that restarts"): publish every lifecycle
whose job succeeded, for every order of its book, and close the books of lifecycles that ended
without a result or whose attempt is gone.

The gateway runs it when it starts and then periodically, so an import in flight when the
gateway stopped (or was killed) is published by the next one, whether or not anyone waits for
it. Everything it needs is in the store: the books (``domain.orders``), the attempts, the
scheduler's word. Publication is idempotent, so a requester waiting and ``Settle`` at the
same time publish once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from slurm_image.application.errors import ApplicationError, UnknownLifecycle
from slurm_image.application.orders import Orders
from slurm_image.application.publish import Publish
from slurm_image.application.status import LifecycleStatus, Statuses, is_final, succeeded
from slurm_image.domain.errors import DomainError, SlurmImageError
from slurm_image.domain.orders import OrderBook

log = logging.getLogger(__name__)


@dataclass
class Settled:
    """What one pass did: lifecycles published, books closed without a result, and books left
    for the next pass (their job still running, or an error said in the log)."""

    published: list[str] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)


class Settle:
    """One pass over the open order books (see the module docstring)."""

    def __init__(self, orders: Orders, statuses: Statuses, publish: Callable[[], Publish]) -> None:
        self._orders = orders
        self._statuses = statuses
        self._publish = publish

    def __call__(self) -> Settled:
        settled = Settled()
        books = self._orders.open_books()
        for book, status in self._observed(books, settled):
            if not is_final(status):
                settled.pending.append(book.lifecycle_id)
            elif succeeded(status):
                self._published(book, settled)
            else:
                self._close(book, settled)
        return settled

    def _observed(
        self, books: list[OrderBook], settled: Settled
    ) -> list[tuple[OrderBook, LifecycleStatus]]:
        """Each book with its lifecycle's status: one scheduler call for all, or, when one of
        them cannot be observed, one call each (a book whose attempt is gone is closed)."""
        if not books:
            return []
        try:
            statuses = self._statuses([book.lifecycle_id for book in books])
            return list(zip(books, statuses, strict=True))
        except (ApplicationError, DomainError, SlurmImageError) as error:
            log.info("settling the books one by one: %s", error)
        found = []
        for book in books:
            try:
                (status,) = self._statuses([book.lifecycle_id])
            except UnknownLifecycle:
                self._close(book, settled)
                continue
            except SlurmImageError as error:
                log.warning(
                    "cannot settle %s now: %s",
                    book.lifecycle_id,
                    error,
                    extra={"lifecycle_id": book.lifecycle_id},
                )
                settled.pending.append(book.lifecycle_id)
                continue
            found.append((book, status))
        return found

    def _published(self, book: OrderBook, settled: Settled) -> None:
        try:
            self._publish()(book.lifecycle_id, replace=book.first.replace)
        except SlurmImageError as error:
            # Refused for good (its alias is another's, bound meanwhile without replace, or the
            # result fails verification): the next pass would be refused the same way.
            log.warning(
                "%s was not published: %s",
                book.lifecycle_id,
                error,
                extra={"lifecycle_id": book.lifecycle_id},
            )
            self._close(book, settled)
            return
        settled.published.append(book.lifecycle_id)

    def _close(self, book: OrderBook, settled: Settled) -> None:
        self._orders.close(book.lifecycle_id)
        settled.closed.append(book.lifecycle_id)
