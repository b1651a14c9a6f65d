"""Requests waiting on one import (docs/gateway.md, "Many users at once"): the order book of a
lifecycle in flight.

Every lifecycle submitted is given a book holding its own order (its request, whether it
replaces), so that whoever settles the store (the gateway, also after a restart) knows what to
publish. An import of a source digest for an architecture (named, or assumed when none is:
``domain.architecture.build_target``) runs one job however many ask for it at once: every
request for the same digest, architecture and role that arrives while the job has not failed
joins the book with an order of its own. When the lifecycle publishes, every
order is bound to the same artifact, each by its requester's rights; then the book is closed.
Books live in the store (``StoreLayout.orders``), so a process that stops loses none.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ValidationError, model_validator

from slurm_image.domain import paths
from slurm_image.domain.access import Ownership
from slurm_image.domain.errors import DomainError, InvalidRecord
from slurm_image.domain.model_config import FROZEN
from slurm_image.domain.request import Request

ORDER_BOOK_MAX_BYTES = 1 << 20
MAX_ORDERS = 1000
"""Orders one book takes; a request past it runs a lifecycle of its own."""


class Order(BaseModel):
    """One request waiting on the lifecycle: what to bind, whether it may replace, when."""

    model_config = FROZEN

    request: Request
    replace: bool
    ordered_at: str


class OrderBook(BaseModel):
    """The orders of one lifecycle in flight; the first is the lifecycle's own."""

    model_config = FROZEN

    schema_version: Literal[1] = 1
    lifecycle_id: str
    source_digest: str | None
    """The import's pinned digest; None for an inspection."""
    architecture: str | None
    """The architecture the import is for; None: unknown, and then nothing joins it."""
    assumed: bool = False
    """The import names no architecture (its job imports for its node's): ``architecture`` is
    the one assumed (``domain.architecture.build_target``), and the book is joined only by
    imports that name none either, and bound only when the job built the one assumed."""
    orders: tuple[Order, ...]

    @model_validator(mode="after")
    def _rules(self) -> OrderBook:
        paths.name(self.lifecycle_id, "lifecycle_id")
        if not self.orders or len(self.orders) > MAX_ORDERS:
            raise InvalidRecord(field="orders", rule=f"must hold 1 to {MAX_ORDERS} orders")
        if len(self.orders) > 1 and not self.joinable:
            raise InvalidRecord(field="orders", rule="only an import for an architecture joins")
        if len({order.request.role for order in self.orders}) != 1:
            raise InvalidRecord(field="orders", rule="every order is for one role")
        return self

    @property
    def joinable(self) -> bool:
        """Whether other requests may join: an import for an architecture named or assumed."""
        return (
            self.first.request.operation == "import_oci"
            and self.source_digest is not None
            and self.architecture is not None
        )

    @property
    def first(self) -> Order:
        return self.orders[0]

    @property
    def ownership(self) -> Ownership:
        """Who may see and cancel the lifecycle: its first request's requester and group."""
        return self.first.request.ownership

    def joined(self, order: Order) -> OrderBook:
        return self.model_copy(update={"orders": (*self.orders, order)})

    def without(self, requester_uid: int | None) -> OrderBook | None:
        """The book with the orders of ``requester_uid`` (None: the store owner's) gone; None
        when none is left."""
        kept = tuple(o for o in self.orders if _uid(o) != requester_uid)
        return self.model_copy(update={"orders": kept}) if kept else None

    def has_requester(self, requester_uid: int | None) -> bool:
        return any(_uid(order) == requester_uid for order in self.orders)

    def canonical_bytes(self) -> bytes:
        from slurm_image.domain.canonical import canonical_json

        return canonical_json(self.model_dump(mode="json"))


def _uid(order: Order) -> int | None:
    requester = order.request.requester
    return requester.uid if requester is not None else None


def load_order_book(data: bytes) -> OrderBook:
    if len(data) > ORDER_BOOK_MAX_BYTES:
        raise InvalidRecord(field="orders", rule=f"must be at most {ORDER_BOOK_MAX_BYTES} bytes")
    try:
        return OrderBook.model_validate_json(data)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        cause = first.get("ctx", {}).get("error")
        if isinstance(cause, DomainError):
            raise InvalidRecord(field=f"orders.{cause.field}", rule=cause.rule) from None
        location = ".".join(str(part) for part in first["loc"]) or "orders"
        raise InvalidRecord(field=f"orders.{location}", rule=first["msg"]) from None
