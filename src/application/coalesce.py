"""One job for many requests (docs/gateway.md, "Many users at once"): an import of a source
digest for an architecture joins the lifecycle already importing it, and the gateway's limits
on lifecycles in flight.

The architecture is the one named (the request's, else the profile's) or, when none is,
the one assumed: the gateway's node's (``target``, ``domain.architecture.build_target``); an
import that names none joins only a book that names none either.

``Lifecycle`` decides under ``deciding(digest)`` (the import's lock, ``orders.import_lock``):
the store's answer first, else ``join`` an open book whose job has not failed (same digest,
architecture and role, a lifecycle the requester may see, whose artifact may back its alias:
``domain.access.may_share_bytes``), else ``require_capacity`` and start a lifecycle of its own,
whose book ``open_book`` writes once it is submitted. ``Publish`` binds every order of the book
when the lifecycle publishes.
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from slurm_image.application.errors import ApplicationError
from slurm_image.application.orders import Orders, import_lock
from slurm_image.application.status import Statuses, is_final, succeeded
from slurm_image.domain.access import Access, may_share_bytes
from slurm_image.domain.architecture import BuildTarget, build_target
from slurm_image.domain.errors import Busy, DomainError
from slurm_image.domain.gateway_settings import GatewaySettings
from slurm_image.domain.orders import MAX_ORDERS, OrderBook
from slurm_image.domain.profile import SiteProfile
from slurm_image.domain.reference import parse_reference
from slurm_image.domain.request import Request
from slurm_image.ports.lock import Locks

log = logging.getLogger(__name__)

RETRY_AFTER_S = 30
"""What a request over a limit is told to wait before asking again."""


@dataclass(frozen=True)
class Joined:
    """The lifecycle in flight a request joined, and what its publication needs."""

    lifecycle_id: str
    job_id: str | None


class Coalesce:
    """Join an import in flight, or make room for a new one (see the module docstring)."""

    def __init__(
        self,
        orders: Orders,
        locks: Locks,
        statuses: Statuses,
        settings: GatewaySettings,
        *,
        lock_timeout_s: float = 60.0,
        machine: str | None = None,
    ) -> None:
        self._machine = machine if machine is not None else platform.machine()
        self._orders = orders
        self._locks = locks
        self._statuses = statuses
        self._settings = settings
        self._timeout = lock_timeout_s

    def target(self, request: Request, profile: SiteProfile) -> BuildTarget:
        """The architecture ``request`` is built for, named or assumed (the module docstring);
        an inspection's is the one it names."""
        if request.operation != "import_oci":
            return BuildTarget(request.architecture)
        return build_target(request.architecture, profile.image_build.arch, self._machine)

    @contextmanager
    def deciding(self, source_digest: str) -> Iterator[None]:
        with self._locks.exclusive(import_lock(source_digest), timeout_s=self._timeout):
            yield

    def join(
        self, request: Request, target: BuildTarget, access: Access | None, *, replace: bool
    ) -> Joined | None:
        """Add ``request``'s order to the open book of the same digest, architecture (named
        or assumed alike) and role whose job may still succeed, and return it; None when there
        is none to join."""
        digest = parse_reference(request.source).digest
        for book in self._orders.open_books():
            if not book.joinable or (book.source_digest, book.architecture, book.assumed) != (
                digest,
                target.architecture,
                target.assumed,
            ):
                continue
            if book.first.request.role != request.role or len(book.orders) >= MAX_ORDERS:
                continue
            if access is not None and not access.sees(book.ownership):
                continue
            if not may_share_bytes(book.ownership.private_group, request.ownership):
                continue
            joinable, job_id = self._joinable(book)
            if not joinable:
                continue
            self._orders.write(book.joined(self._orders.order(request, replace=replace)))
            log.info(
                "%s joins the import of %s in flight",
                request.name,
                digest,
                extra={"lifecycle_id": book.lifecycle_id},
            )
            return Joined(lifecycle_id=book.lifecycle_id, job_id=job_id)
        return None

    def _joinable(self, book: OrderBook) -> tuple[bool, str | None]:
        """Whether the book's lifecycle may still succeed, and its job id; not when it failed
        or cannot be observed (its book is then left for the gateway to settle)."""
        try:
            (status,) = self._statuses([book.lifecycle_id])
        except (ApplicationError, DomainError) as error:
            log.info("not joining %s: %s", book.lifecycle_id, error)
            return False, None
        return not (is_final(status) and not succeeded(status)), status.job_id

    def withdraw(self, lifecycle_id: str, access: Access) -> bool:
        """Take ``access``'s requester's orders out of the book of ``lifecycle_id`` when they
        only joined it (not its own requester, group or an admin); whether they did."""
        book = self._orders.book(lifecycle_id)
        uid = access.account.uid
        if (
            book is None
            or book.source_digest is None
            or not book.joinable
            or access.owns(book.ownership)
            or not book.has_requester(uid)
        ):
            return False
        with self.deciding(book.source_digest):
            current = self._orders.book(lifecycle_id)
            left = current.without(uid) if current is not None else None
            if left is not None:
                self._orders.write(left)
        return True

    def require_capacity(self, access: Access | None) -> None:
        """Refuse a new lifecycle past ``max_active`` in flight, or past
        ``max_active_per_user`` for its requester (``Busy``: 429 through the gateway). The
        store's owner and the admins are held to neither."""
        if access is None or access.admin:
            return
        books = self._orders.open_books()
        settings = self._settings
        if len(books) >= settings.max_active:
            raise Busy(
                field="max_active",
                rule=f"{len(books)} imports are in flight, the gateway's limit is"
                f" {settings.max_active}: ask again later",
                retry_after_s=RETRY_AFTER_S,
            )
        uid = access.account.uid
        mine = sum(1 for book in books if book.has_requester(uid))
        if mine >= settings.max_active_per_user:
            raise Busy(
                field="max_active_per_user",
                rule=f"{access.account.user} has {mine} imports in flight, the limit is"
                f" {settings.max_active_per_user}: wait for one to end",
                retry_after_s=RETRY_AFTER_S,
            )

    def open_book(
        self, lifecycle_id: str, request: Request, target: BuildTarget, *, replace: bool
    ) -> None:
        """The book of a lifecycle just submitted, holding its own order, with the architecture
        it is for (``target``: named, or assumed)."""
        importing = request.operation == "import_oci"
        book = OrderBook(
            lifecycle_id=lifecycle_id,
            source_digest=parse_reference(request.source).digest if importing else None,
            architecture=target.architecture,
            assumed=target.assumed,
            orders=(self._orders.order(request, replace=replace),),
        )
        self._orders.write(book)
