"""Who may know of a lifecycle by its id, and who may change it (docs/gateway.md, "Who may do
what"). Every use case that takes a lifecycle id asks this one rule first.

A lifecycle belongs to its request's requester and group, as its plan records them
(``Request.ownership``). One made with the requester's own registry credentials is private:
to a reader ``sees`` does not let know of it, its id names nothing, and every use case answers
exactly what it answers for an id no attempt has (``records.unknown_lifecycle``). Any other
lifecycle is anyone's to observe. Changing one (submitting it, publishing it, cancelling its
job, removing its attempt) is for its owner, its group and the admins (``Access.owns``);
publishing it is also for a request that joined it (``domain.orders``), whose alias waits on
its publication.
"""

from __future__ import annotations

from slurm_image.application.attempt_plan import attempt_plan
from slurm_image.application.catalog_reader import Sees
from slurm_image.application.orders import Orders
from slurm_image.application.records import attempt_directory, unknown_lifecycle
from slurm_image.domain.access import Access, Ownership
from slurm_image.domain.errors import Forbidden
from slurm_image.domain.history import HistoryEvent
from slurm_image.ports.workspace import Workspace


class LifecycleRights:
    """The rule for one reader (``sees``: None for the store's own account, which sees every
    lifecycle) and one requester's rights (``access``: None for the store's own account), for
    one use case's call (what each plan says is read once)."""

    def __init__(
        self,
        workspace: Workspace,
        access: Access | None = None,
        sees: Sees | None = None,
        orders: Orders | None = None,
    ) -> None:
        self._workspace = workspace
        self._access = access
        self._sees = sees
        self._orders = orders
        self._ownerships: dict[str, Ownership] = {}

    def ownership(self, lifecycle_id: str) -> Ownership:
        """What the lifecycle's plan says of whom it belongs to; the store owner's when there
        is no plan to read (an id no attempt has answers for itself)."""
        known = self._ownerships.get(lifecycle_id)
        if known is None:
            plan = attempt_plan(self._workspace, lifecycle_id)
            known = plan.request.ownership if plan is not None else Ownership()
            self._ownerships[lifecycle_id] = known  # a plan never changes once staged
        return known

    def hidden(self, lifecycle_id: str) -> bool:
        """Whether the reader may not know the lifecycle exists."""
        if self._sees is None:
            return False
        return not self._sees(self.ownership(lifecycle_id))

    def hides(self, event: HistoryEvent) -> bool:
        """Whether the reader may not read ``event``: one of a private lifecycle or alias of a
        group they may not see, as the event records it, or as its lifecycle's plan says (an
        event recorded before events said so)."""
        if self._sees is None:
            return False
        if event.private and not self._sees(Ownership(group=event.group, private=True)):
            return True
        return event.lifecycle_id is not None and self.hidden(event.lifecycle_id)

    def require_seen(self, lifecycle_id: str) -> None:
        """Answer as for an id no attempt has when the reader may not know of the lifecycle."""
        if self.hidden(lifecycle_id):
            raise unknown_lifecycle(self._workspace, lifecycle_id)

    def require_owner(self, lifecycle_id: str, *, what: str) -> None:
        """``require_seen``, then: only the lifecycle's owner, its group and the admins (an
        attempt whose plan cannot be read is the store owner's)."""
        self._require_known(lifecycle_id)
        if self._access is not None:
            self._access.require_owner(
                self.ownership(lifecycle_id), field="lifecycle_id", what=what
            )

    def _require_known(self, lifecycle_id: str) -> None:
        """An id no attempt has is unknown before anyone's rights are weighed, and so is one
        the reader may not know of."""
        attempt_directory(self._workspace, lifecycle_id)
        self.require_seen(lifecycle_id)

    def may_publish(self, lifecycle_id: str) -> bool:
        """Whether the requester owns the lifecycle or holds an order in its book."""
        access = self._access
        if access is None or access.owns(self.ownership(lifecycle_id)):
            return True
        book = self._orders.book(lifecycle_id) if self._orders is not None else None
        return book is not None and book.has_requester(access.account.uid)

    def require_publisher(self, lifecycle_id: str) -> None:
        """``require_seen``, then: only who ``may_publish``."""
        self._require_known(lifecycle_id)
        access = self._access
        if access is None or self.may_publish(lifecycle_id):
            return
        raise Forbidden(
            field="lifecycle_id",
            rule=f"publishing {lifecycle_id} is for {self.ownership(lifecycle_id).describe()},"
            f" the requests that joined it and the gateway's admins; {access.account.user} is"
            " none of them",
        )
