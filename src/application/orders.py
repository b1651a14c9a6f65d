"""The order books of imports in flight (``domain.orders``; docs/gateway.md, "Many users at
once"), kept in the store: ``Orders`` reads and writes them, ``import_lock`` names the lock
under which an import decides whether to join one or start its own.

Lock order: an import's lock, then the store and alias locks (``Publish``); nothing holding an
alias lock takes an import's lock.
"""

from __future__ import annotations

import logging
from contextlib import suppress

from slurm_image.application.catalog_reader import read_record
from slurm_image.domain import paths
from slurm_image.domain.errors import DomainError
from slurm_image.domain.orders import Order, OrderBook, load_order_book
from slurm_image.domain.plan import format_time
from slurm_image.domain.request import Request
from slurm_image.domain.store_layout import StoreLayout, hex_digest
from slurm_image.ports.clock import Clock
from slurm_image.ports.store import Store
from slurm_image.ports.workspace import NotFound

log = logging.getLogger(__name__)

BOOK_MODE = 0o600
IMPORT_LOCK_PREFIX = "import."


def import_lock(source_digest: str) -> str:
    """The lock an import of ``source_digest`` decides under: one of 256, by the digest's first
    byte, so that imports of different images rarely wait for each other and the store keeps
    a bounded number of lock files."""
    hexadecimal = hex_digest(source_digest.removeprefix("sha256:"), "source_digest")
    return f"{IMPORT_LOCK_PREFIX}{hexadecimal[:2]}"


class Orders:
    """Read and write the order books (the caller holds the book's import lock to change
    one)."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self.layout = StoreLayout(store.root)

    def order(self, request: Request, *, replace: bool) -> Order:
        return Order(request=request, replace=replace, ordered_at=format_time(self._clock.now()))

    def book(self, lifecycle_id: str) -> OrderBook | None:
        """The book of ``lifecycle_id``, or None (never opened, or closed). A book that cannot
        be read is no book: its lifecycle publishes its own alias still."""
        data = read_record(self._store, self.layout.order_book(lifecycle_id))
        if data is None:
            return None
        try:
            book = load_order_book(data)
        except DomainError as error:
            log.warning("ignoring the order book of %s: %s", lifecycle_id, error)
            return None
        return book if book.lifecycle_id == lifecycle_id else None

    def open_books(self) -> list[OrderBook]:
        """Every open book, oldest lifecycle first by its first order."""
        if self._store.entry_kind(self.layout.orders) != "directory":
            return []
        books = []
        for entry in self._store.list_directory(self.layout.orders):
            stem = entry.removesuffix(".json")
            if stem == entry or not paths.NAME_PATTERN.fullmatch(stem):
                continue
            book = self.book(stem)
            if book is not None:
                books.append(book)
        return sorted(books, key=lambda book: book.first.ordered_at)

    def write(self, book: OrderBook) -> None:
        self._store.ensure_directory(self.layout.orders, mode=0o700)
        self._store.publish_file(
            self.layout.order_book(book.lifecycle_id),
            book.canonical_bytes(),
            mode=BOOK_MODE,
            staging=self.layout.orders,
        )

    def close(self, lifecycle_id: str) -> None:
        with suppress(NotFound):
            self._store.remove_file(self.layout.order_book(lifecycle_id))
