"""``MemoryAccounts``: a user database in memory (users with a primary gid, groups with a gid
and members), answering by the same rules as ``SystemAccounts`` (``make_account``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from slurm_image.adapters.system_accounts import make_account, unknown_group
from slurm_image.domain.requester import Account
from slurm_image.ports.accounts import UnknownAccount


@dataclass
class _Group:
    gid: int
    members: set[str] = field(default_factory=set)


@dataclass
class MemoryAccounts:
    """``add_user(name, uid, gid)`` and ``add_group(name, gid, members)``; a user's groups are
    the groups that have its primary gid or list it as a member, as the C library's
    ``getgrouplist`` answers. Changes show at the next call."""

    users: dict[int, tuple[str, int]] = field(default_factory=dict)
    groups: dict[str, _Group] = field(default_factory=dict)

    def add_user(self, name: str, uid: int, gid: int) -> None:
        self.users[uid] = (name, gid)

    def add_group(self, name: str, gid: int, members: tuple[str, ...] = ()) -> None:
        self.groups[name] = _Group(gid, set(members))

    def add_member(self, group: str, user: str) -> None:
        self.groups[group].members.add(user)

    def remove_group(self, name: str) -> None:
        del self.groups[name]

    def account(self, uid: int) -> Account:
        if uid not in self.users:
            raise UnknownAccount(field="uid", rule=f"uid {uid} has no account here", value=uid)
        user, gid = self.users[uid]
        names = [
            name for name, group in self.groups.items() if group.gid == gid or user in group.members
        ]
        return make_account(user, uid, gid, names)

    def group_id(self, name: str) -> int:
        if name not in self.groups:
            raise unknown_group(name)
        return self.groups[name].gid
