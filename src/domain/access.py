"""Who may do what (docs/gateway.md, "Who may do what"): pure rules over an authenticated
``Account``, the ``[gateway]`` settings and what a record says of its alias.

- The store's owner (the account the gateway runs as, or a user running the command line on a
  store of their own) and ``admins`` may do everything, ``gc`` included.
- ``importers`` (default: everyone) may import and inspect.
- An alias belongs to its owner (the requester whose request first published it) and, when it
  names one, to its group: replacing it, unregistering it and cancelling a lifecycle are theirs
  and the admins'. An alias published before owners were recorded is the store owner's.
- A private alias (published with the requester's own registry credentials) is seen only by
  its group, its owner and the admins; to anyone else it does not exist.
- Bytes kept for one group alone (an import with its own registry credentials) back only the
  aliases private to that group (``may_share_bytes``).
- A reader with no identity (``[gateway] public_catalog``, the catalog's static pages) sees every
  alias and lifecycle but the private ones (``seen_by_anyone``).
"""

from __future__ import annotations

from dataclasses import dataclass

from slurm_image.domain.errors import Forbidden
from slurm_image.domain.gateway_settings import GatewaySettings, named
from slurm_image.domain.requester import Account, Requester

STORE_OWNER = "the store's owner"


@dataclass(frozen=True)
class Ownership:
    """What a record says of who an alias or a lifecycle belongs to: ``owner`` None for one
    recorded before owners were; ``private`` for one only its group may see."""

    owner: Requester | None = None
    group: str | None = None
    private: bool = False

    @property
    def recorded(self) -> bool:
        """Whether there is anything to record (else the alias is the store owner's)."""
        return self.owner is not None or self.group is not None or self.private

    def describe(self) -> str:
        who = self.owner.user if self.owner is not None else STORE_OWNER
        return f"{who} and group {self.group}" if self.group else who

    @property
    def private_group(self) -> str | None:
        """The group alone that may read what is kept for this alias; None: everyone."""
        return self.group if self.private else None


def may_share_bytes(kept_for: str | None, wanted: Ownership) -> bool:
    """Whether bytes kept for the group ``kept_for`` alone (None: for everyone) may back an
    alias owned as ``wanted``: everyone's, any alias; a group's (an artifact only it reads),
    only an alias private to that same group, so that no alias names a file its readers cannot
    read."""
    return kept_for is None or wanted.private_group == kept_for


@dataclass(frozen=True)
class Access:
    """The rules for one requester on one store: ``store_owner_uid`` is the uid that owns the
    store (and runs whatever front end acts on it)."""

    account: Account
    settings: GatewaySettings
    store_owner_uid: int

    @property
    def admin(self) -> bool:
        return self.account.uid == self.store_owner_uid or named(
            self.settings.admins, self.account.user, self.account.groups
        )

    def require_admin(self, field: str, what: str) -> None:
        if not self.admin:
            raise Forbidden(
                field=field,
                rule=f"{what} is for the gateway's admins ([gateway] admins);"
                f" {self.account.user} is not one",
            )

    def require_importer(self, field: str = "requester") -> None:
        importers = self.settings.importers
        if self.admin or importers is None:
            return
        if not named(importers, self.account.user, self.account.groups):
            raise Forbidden(
                field=field,
                rule=f"importing is for [gateway] importers; {self.account.user} is not one",
            )

    def require_group(self, group: str) -> None:
        """A request may name only a group its requester is in."""
        if not self.account.in_group(group):
            raise Forbidden(
                field="group",
                rule=f"{self.account.user} is not in group {group}: an alias may be shared only"
                " with a group its requester is in",
                value=group,
            )

    def owns(self, ownership: Ownership) -> bool:
        """Whether the requester may change what ``ownership`` describes."""
        if self.admin:
            return True
        owner = ownership.owner
        if owner is not None and owner.uid == self.account.uid:
            return True
        return ownership.group is not None and self.account.in_group(ownership.group)

    def require_owner(self, ownership: Ownership, *, field: str, what: str) -> None:
        if not self.owns(ownership):
            raise Forbidden(
                field=field,
                rule=f"{what} is for {ownership.describe()} and the gateway's admins;"
                f" {self.account.user} is neither",
            )

    def sees(self, ownership: Ownership) -> bool:
        """Whether the requester may know the alias or lifecycle exists."""
        return not ownership.private or self.owns(ownership)


def seen_by_anyone(ownership: Ownership) -> bool:
    """Whether a reader with no identity may know the alias or lifecycle exists: anything but a
    private one (the catalog's public pages, docs/gateway.md, "The catalog page")."""
    return not ownership.private
