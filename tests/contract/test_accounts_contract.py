"""The Accounts port, against every adapter: an account's name, uid, primary gid and the names of
all its groups now; a group's gid; an unknown uid or group, and a name the store cannot record,
refused as ``UnknownAccount``; a gid without a name left out of the groups.

``SystemAccounts`` runs against real accounts and groups the test makes with useradd and
groupadd (tests/accounts.py, which needs root: locally without it these skip, under CI=true
they fail). Those accounts last the session, so each test makes its own roles."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from accounts import OrdinaryAccounts, OrdinaryGroup, ordinary_accounts  # noqa: F401  (the fixture)
from slurm_image.adapters.memory import MemoryAccounts
from slurm_image.adapters.system_accounts import SystemAccounts
from slurm_image.domain.requester import Account, Requester
from slurm_image.ports.accounts import Accounts, UnknownAccount

_ROLES = itertools.count()


@dataclass(frozen=True)
class Made:
    name: str
    uid: int
    gid: int
    """Its own group's, named ``group``."""
    group: str


@dataclass
class Harness:
    accounts: Accounts
    group: Callable[[str], tuple[str, int]]
    """A new group for a role: its name and gid."""
    user: Callable[..., Made]
    """user(role, groups=(names...), name=None): a new account in its own group and those."""
    join: Callable[[Made, str], None]
    """Add the account to the group, after the fact."""
    unname_own_group: Callable[[Made], None]
    """Leave the account's primary gid without a group entry."""
    unknown_uid: int
    prefix: str
    """What a test-chosen account name begins with."""


@pytest.fixture
def system_harness(ordinary_accounts: OrdinaryAccounts) -> Harness:  # noqa: F811
    made = ordinary_accounts
    groups: dict[str, OrdinaryGroup] = {}

    def role(base: str) -> str:
        return f"{base}{next(_ROLES)}"

    def group(base: str) -> tuple[str, int]:
        created = made.group(role(base))
        groups[created.name] = created
        return created.name, created.gid

    def user(base: str, groups_: Sequence[str] = (), name: str | None = None) -> Made:
        account = made.user(
            role(base),
            [groups[group_name] for group_name in groups_],
            name=name,
        )
        return Made(account.name, account.uid, account.gid, account.group)

    def join(account: Made, group_name: str) -> None:
        ordinary = next(a for a in made.users.values() if a.uid == account.uid)
        made.add_to_group(ordinary, groups[group_name])

    def unname(account: Made) -> None:
        ordinary = next(a for a in made.users.values() if a.uid == account.uid)
        made.remove_own_group(ordinary)

    return Harness(
        accounts=SystemAccounts(),
        group=group,
        user=user,
        join=join,
        unname_own_group=unname,
        unknown_uid=made.unused_uid(),
        prefix=made.prefix,
    )


@pytest.fixture
def memory_harness() -> Harness:
    accounts = MemoryAccounts()
    ids = itertools.count(5000)

    def group(base: str) -> tuple[str, int]:
        gid = next(ids)
        accounts.add_group(base, gid)
        return base, gid

    def user(base: str, groups_: Sequence[str] = (), name: str | None = None) -> Made:
        uid = next(ids)
        accounts.add_group(base, uid)
        accounts.add_user(base if name is None else name, uid, uid)
        for group_name in groups_:
            accounts.add_member(group_name, base if name is None else name)
        return Made(base if name is None else name, uid, uid, base)

    return Harness(
        accounts=accounts,
        group=group,
        user=user,
        join=lambda account, group_name: accounts.add_member(group_name, account.name),
        unname_own_group=lambda account: accounts.remove_group(account.group),
        unknown_uid=4999,
        prefix="",
    )


@pytest.fixture(params=["system", "memory"])
def harness(request: pytest.FixtureRequest) -> Harness:
    built: Harness = request.getfixturevalue(f"{request.param}_harness")
    return built


def test_adapters_implement_the_port(harness: Harness) -> None:
    assert isinstance(harness.accounts, Accounts)


def test_an_account_has_its_name_ids_and_every_group(harness: Harness) -> None:
    first, _ = harness.group("first")
    second, _ = harness.group("second")
    made = harness.user("member", [first, second])
    assert harness.accounts.account(made.uid) == Account(
        user=made.name, uid=made.uid, gid=made.gid, groups=frozenset({made.group, first, second})
    )


def test_an_account_in_no_other_group_is_in_its_own(harness: Harness) -> None:
    made = harness.user("alone")
    account = harness.accounts.account(made.uid)
    assert account.groups == frozenset({made.group})
    assert account.requester == Requester(user=made.name, uid=made.uid)


def test_a_membership_shows_at_the_next_call(harness: Harness) -> None:
    joined, _ = harness.group("later")
    made = harness.user("joiner")
    assert not harness.accounts.account(made.uid).in_group(joined)
    harness.join(made, joined)
    assert harness.accounts.account(made.uid).in_group(joined)


def test_a_primary_gid_without_a_name_is_left_out_of_the_groups(harness: Harness) -> None:
    other, _ = harness.group("named")
    made = harness.user("unnamed", [other])
    harness.unname_own_group(made)
    account = harness.accounts.account(made.uid)
    assert account.gid == made.gid
    assert account.groups == frozenset({other})


def test_a_group_has_its_gid(harness: Harness) -> None:
    name, gid = harness.group("looked")
    made = harness.user("owner")
    assert harness.accounts.group_id(name) == gid
    assert harness.accounts.group_id(made.group) == made.gid


def test_an_unknown_uid_is_refused(harness: Harness) -> None:
    with pytest.raises(UnknownAccount) as caught:
        harness.accounts.account(harness.unknown_uid)
    assert (caught.value.field, caught.value.value) == ("uid", harness.unknown_uid)


@pytest.mark.parametrize("uid", [-1, 2**32 - 1, 2**40])
def test_what_is_no_uid_is_refused(harness: Harness, uid: int) -> None:
    with pytest.raises(UnknownAccount) as caught:
        harness.accounts.account(uid)
    assert caught.value.field == "uid"


@pytest.mark.parametrize("name", ["sigw-no-such-group", "no such group", "", "x\x00y", "-g"])
def test_an_unknown_group_is_refused(harness: Harness, name: str) -> None:
    with pytest.raises(UnknownAccount) as caught:
        harness.accounts.group_id(name)
    assert (caught.value.field, caught.value.value) == ("group", name)


def test_an_account_whose_name_the_store_cannot_record_is_refused(harness: Harness) -> None:
    made = harness.user("badname", name=harness.prefix + "Bad@name")
    with pytest.raises(UnknownAccount) as caught:
        harness.accounts.account(made.uid)
    assert caught.value.field == "uid"
    assert "not one the store can record" in caught.value.rule
