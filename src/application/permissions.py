"""Who may do what on this store, for the use cases (docs/gateway.md, "Who may do what"): the
rules of ``domain.access`` applied to requesters as the site's user database knows them now.

Every front end builds one ``Permissions`` for the store it acts on: the ``[gateway]`` settings
of the profile, the ``Accounts`` port, and the account the front end itself runs as, which owns
the store. A request that names no requester (a command run by that account) acts as it, so on
a user's own store every rule lets everything through, and the command line behaves as it did
before there was a gateway.
"""

from __future__ import annotations

from slurm_image.domain.access import Access, Ownership, may_share_bytes
from slurm_image.domain.errors import Forbidden
from slurm_image.domain.gateway_settings import GatewaySettings
from slurm_image.domain.publication import SourceRecord
from slurm_image.domain.requester import Account, Requester
from slurm_image.ports.accounts import Accounts, UnknownAccount


class Permissions:
    """The rules for the requesters of one store (see the module docstring)."""

    def __init__(
        self,
        accounts: Accounts,
        settings: GatewaySettings,
        *,
        service_uid: int,
        service_user: str,
    ) -> None:
        self._accounts = accounts
        self.settings = settings
        self.service_uid = service_uid
        self.service_user = service_user

    def account(self, uid: int) -> Account:
        return self._accounts.account(uid)

    def of(self, requester: Requester | None) -> Access:
        """The rules for ``requester`` (None: the store's own account, which may do everything
        and is looked up nowhere). A requester whose uid the user database no longer knows, or
        knows under another name, may do nothing."""
        if requester is None:
            own = Account(user=self.service_user, uid=self.service_uid, gid=-1, groups=frozenset())
            return Access(account=own, settings=self.settings, store_owner_uid=self.service_uid)
        uid = requester.uid
        try:
            account = self._accounts.account(uid)
        except UnknownAccount:
            raise Forbidden(
                field="requester",
                rule=f"uid {uid} is not an account of this site (any more)",
            ) from None
        if account.user != requester.user:
            raise Forbidden(
                field="requester",
                rule=f"uid {uid} is now {account.user}, not {requester.user}",
            )
        return Access(account=account, settings=self.settings, store_owner_uid=self.service_uid)

    def require_service_in(self, group: str) -> None:
        """A private import's files are given to its group, which the store's own account must
        be in (the system refuses to give a file to a group its owner is not in)."""
        service = self._accounts.account(self.service_uid)
        if not service.in_group(group):
            raise Forbidden(
                field="group",
                rule=f"the gateway's account {service.user} is not in group {group}, so it"
                " cannot keep an image for that group alone: ask the site to add it, or name"
                " another group",
                value=group,
            )

    def require_may_request(self, requester: Requester | None, ownership: Ownership) -> Access:
        """The checks of a request before anything is staged: the requester may import, may
        share with the group it names, and the store can keep a private image for it."""
        access = self.of(requester)
        access.require_importer()
        if ownership.group is not None:
            access.require_group(ownership.group)
            if ownership.private:
                self.require_service_in(ownership.group)
        return access


def may_use_source(source: SourceRecord, wanted: Ownership, access: Access | None) -> bool:
    """Whether a stored source may answer a request for an alias owned as ``wanted``, by
    ``access``'s requester: any source, but one imported with someone's own registry
    credentials (its artifact its group's alone) only a request private to that group
    (``domain.access.may_share_bytes``), by one of the group or an admin."""
    if not may_share_bytes(source.private_group, wanted):
        return False
    if access is None or source.private_group is None:
        return True
    return access.admin or access.account.in_group(source.private_group)
