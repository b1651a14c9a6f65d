"""Who asks for something (docs/gateway.md, "Who is asking"): the account a request acts for.

On the command line that is the process's own account; through the gateway it is the account
the kernel (a unix socket's peer credentials) or munged (a MUNGE credential) names, never the
gateway's service account. ``Requester`` is what records keep (a plan, an alias's owner, the
history); ``Account`` adds the groups the account is in now, which only the rules of who may
do what read (``domain.access``) and which are never recorded.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, field_validator

from slurm_image.domain.account_names import ACCOUNT_NAME, account_name
from slurm_image.domain.errors import InvalidRequest
from slurm_image.domain.model_config import FROZEN

__all__ = ["ACCOUNT_NAME", "MAX_ID", "Account", "Requester", "account_id", "account_name"]

MAX_ID = 2**32 - 2
"""The largest uid or gid (``(uid_t) -1`` means "none")."""


def account_id(value: int, field: str) -> int:
    if not 0 <= value <= MAX_ID:
        raise InvalidRequest(field=field, rule=f"must be a uid or gid from 0 to {MAX_ID}")
    return value


class Requester(BaseModel):
    """The account a request acts for, as records keep it: its name and uid."""

    model_config = FROZEN

    user: str
    uid: int

    @field_validator("user")
    @classmethod
    def _user(cls, value: str) -> str:
        return account_name(value, "user")

    @field_validator("uid")
    @classmethod
    def _uid(cls, value: int) -> int:
        return account_id(value, "uid")

    def describe(self) -> str:
        return f"{self.user} (uid {self.uid})"


@dataclass(frozen=True)
class Account:
    """An authenticated account as the site's user database knows it now: ``groups`` the names
    of every group it is in (its primary group included)."""

    user: str
    uid: int
    gid: int
    groups: frozenset[str]

    @property
    def requester(self) -> Requester:
        return Requester(user=self.user, uid=self.uid)

    def in_group(self, group: str) -> bool:
        return group in self.groups
