"""The Accounts port over this host's user database through the C library (``pwd``, ``grp``,
``os.getgrouplist``): whatever NSS serves, files, LDAP or SSSD, asked anew at every call.

A group the account is in but that has no name (a gid with no entry in the group database) is
left out of its groups: who may do what names groups by name (``[gateway] admins = ["@g"]``,
``--group g``), so a gid without one can be named by no setting and grants nothing, and the
store records no group by number. The account's primary gid is still its ``gid``.
"""

from __future__ import annotations

import grp
import os
import pwd
from collections.abc import Iterable

from slurm_image.domain.requester import ACCOUNT_NAME, MAX_ID, Account
from slurm_image.ports.accounts import UnknownAccount


def make_account(user: str, uid: int, gid: int, groups: Iterable[str | None]) -> Account:
    """The port's answer from the database's: ``groups`` the names of the account's groups,
    None for one without a name (left out). A user name the store could not record as a
    requester is an ``UnknownAccount``: the port names no one it cannot record."""
    if not ACCOUNT_NAME.fullmatch(user):
        raise UnknownAccount(
            field="uid",
            rule=f"uid {uid}'s account name is not one the store can record (a letter or _,"
            " then letters, digits, _ . -, at most 32)",
            value=uid,
        )
    return Account(
        user=user,
        uid=uid,
        gid=gid,
        groups=frozenset(name for name in groups if name is not None),
    )


def unknown_group(name: str) -> UnknownAccount:
    return UnknownAccount(field="group", rule=f"no group {name!r} is known here", value=name)


class SystemAccounts:
    def account(self, uid: int) -> Account:
        if not 0 <= uid <= MAX_ID:
            raise UnknownAccount(field="uid", rule=f"{uid} is no uid", value=uid)
        try:
            entry = pwd.getpwuid(uid)
        except KeyError:
            raise UnknownAccount(
                field="uid", rule=f"uid {uid} has no account here", value=uid
            ) from None
        gids = os.getgrouplist(entry.pw_name, entry.pw_gid)
        return make_account(entry.pw_name, uid, entry.pw_gid, map(_group_name, dict.fromkeys(gids)))

    def group_id(self, name: str) -> int:
        if not ACCOUNT_NAME.fullmatch(name):
            raise unknown_group(name)
        try:
            return grp.getgrnam(name).gr_gid
        except KeyError:
            raise unknown_group(name) from None


def _group_name(gid: int) -> str | None:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return None
