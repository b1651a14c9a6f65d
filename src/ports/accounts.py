"""The Accounts port: the site's user database, as the gateway asks it who an authenticated uid
is and which groups it is in (docs/gateway.md, "Who is asking").

``account(uid)`` answers with the account's name, primary gid and the names of every group it
is in now (its primary group included; a group with no name is left out, since no setting or
request can name it); ``group_id(name)`` with a group's gid. The answers are the system's at the
time of the call, never cached across calls by the port.

Errors: ``UnknownAccount`` (field: ``uid`` or ``group``, value: the uid or name) for a uid or
group the database does not know. A uid with no name, or with a name the store cannot record
(``domain.requester.ACCOUNT_NAME``), cannot be recorded as a requester, so it is refused rather
than named by number.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from slurm_image.domain.errors import SlurmImageError

if TYPE_CHECKING:
    from slurm_image.domain.requester import Account


class UnknownAccount(SlurmImageError):
    """A uid or group name the site's user database does not know."""


@runtime_checkable
class Accounts(Protocol):
    def account(self, uid: int) -> Account:
        """The account of ``uid`` with its groups now."""
        ...

    def group_id(self, name: str) -> int:
        """The gid of the group ``name``."""
        ...
