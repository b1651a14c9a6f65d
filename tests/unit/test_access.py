"""Who may do what (domain/access.py, domain/gateway_settings.py, application/permissions.py):
pure rules over an account, the [gateway] settings and what a record says."""

from __future__ import annotations

import pytest

from slurm_image.adapters.memory import MemoryAccounts
from slurm_image.application.permissions import Permissions
from slurm_image.domain.access import Access, Ownership, seen_by_anyone
from slurm_image.domain.errors import Forbidden, InvalidProfile
from slurm_image.domain.gateway_settings import GatewaySettings
from slurm_image.domain.profile import parse_profile
from slurm_image.domain.requester import Account, Requester

SERVICE = 500
ALICE = Requester(user="alice", uid=1001)


def account(user: str, uid: int, *groups: str) -> Account:
    return Account(user=user, uid=uid, gid=uid, groups=frozenset({user, *groups}))


def access(who: Account, **settings: object) -> Access:
    return Access(
        account=who, settings=GatewaySettings.model_validate(settings), store_owner_uid=SERVICE
    )


def test_the_store_owner_and_named_admins_are_admins() -> None:
    assert access(account("svc", SERVICE)).admin
    assert access(account("carol", 1003), admins=("carol",)).admin
    assert access(account("dave", 1004, "hpc"), admins=("@hpc",)).admin
    assert not access(account("eve", 1005, "hpc"), admins=("@ops", "hpc")).admin


@pytest.mark.parametrize(
    ("who", "ownership", "allowed"),
    [
        (account("alice", 1001), Ownership(owner=ALICE), True),
        (account("bob", 1002), Ownership(owner=ALICE), False),
        (account("bob", 1002, "physics"), Ownership(owner=ALICE, group="physics"), True),
        (account("bob", 1002, "chemistry"), Ownership(owner=ALICE, group="physics"), False),
        (account("bob", 1002), Ownership(), False),
        (account("svc", SERVICE), Ownership(owner=ALICE), True),
        (account("alice2", 1001), Ownership(owner=ALICE), True),
    ],
    ids=["owner", "other", "group", "other-group", "store-owners", "store-owner", "same-uid"],
)
def test_an_alias_belongs_to_its_owner_its_group_and_the_admins(
    who: Account, ownership: Ownership, allowed: bool
) -> None:
    rules = access(who)
    assert rules.owns(ownership) is allowed
    if allowed:
        rules.require_owner(ownership, field="name", what="changing alias a")
    else:
        with pytest.raises(Forbidden) as refused:
            rules.require_owner(ownership, field="name", what="changing alias a")
        assert refused.value.field == "name"
        owner = ownership.owner.user if ownership.owner else "the store's owner"
        assert owner in refused.value.rule and who.user in refused.value.rule


def test_a_private_alias_is_seen_by_its_group_its_owner_and_the_admins_alone() -> None:
    private = Ownership(owner=ALICE, group="g", private=True)
    assert access(account("bob", 1002, "g")).sees(private)
    assert access(account("alice", 1001)).sees(private)
    assert access(account("carol", 1003), admins=("carol",)).sees(private)
    assert not access(account("dave", 1004)).sees(private)
    assert access(account("dave", 1004)).sees(Ownership(owner=ALICE, group="g"))


def test_a_reader_with_no_identity_sees_everything_but_the_private_aliases() -> None:
    assert seen_by_anyone(Ownership())
    assert seen_by_anyone(Ownership(owner=ALICE, group="g"))
    assert not seen_by_anyone(Ownership(owner=ALICE, group="g", private=True))


def test_importers_default_to_everyone_and_may_be_narrowed() -> None:
    access(account("dave", 1004)).require_importer()
    access(account("dave", 1004, "hpc"), importers=("@hpc",)).require_importer()
    with pytest.raises(Forbidden) as refused:
        access(account("dave", 1004), importers=("@hpc", "alice")).require_importer()
    assert "importers" in refused.value.rule
    access(account("svc", SERVICE), importers=("alice",)).require_importer()


def test_a_requester_shares_only_with_a_group_they_are_in() -> None:
    access(account("alice", 1001, "physics")).require_group("physics")
    with pytest.raises(Forbidden) as refused:
        access(account("alice", 1001)).require_group("physics")
    assert refused.value.field == "group"


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({"admins": ["ok", "not a name"]}, "gateway.admins"),
        ({"admins": ["@"]}, "gateway.admins"),
        ({"max_active": 0}, "gateway.max_active"),
        ({"max_body_bytes": 10}, "gateway.max_body_bytes"),
        ({"unknown": 1}, "gateway.unknown"),
    ],
)
def test_a_bad_gateway_section_names_its_field(table: dict[str, object], field: str) -> None:
    profile = {
        "workspace_root": "/tmp/ws",
        "image_build": {
            "partition": "cpu",
            "cpus_per_task": 1,
            "memory": "1G",
            "time_limit": "0:10:00",
        },
        "gateway": table,
    }
    with pytest.raises(InvalidProfile) as refused:
        parse_profile(profile)
    assert refused.value.field.startswith(field)


def permissions(accounts: MemoryAccounts) -> Permissions:
    return Permissions(accounts, GatewaySettings(), service_uid=SERVICE, service_user="svc")


def test_a_requester_is_looked_up_as_the_user_database_knows_them_now() -> None:
    accounts = MemoryAccounts()
    accounts.add_user("svc", SERVICE, SERVICE)
    accounts.add_user("alice", 1001, 1001)
    accounts.add_group("physics", 3000, ("alice",))
    rules = permissions(accounts).of(ALICE)
    assert rules.account.in_group("physics")
    accounts.users[1001] = ("mallory", 1001)
    with pytest.raises(Forbidden, match="now mallory"):
        permissions(accounts).of(ALICE)
    with pytest.raises(Forbidden, match="uid 4242"):
        permissions(accounts).of(Requester(user="ghost", uid=4242))


def test_the_store_owner_is_looked_up_nowhere_and_may_do_everything() -> None:
    rules = permissions(MemoryAccounts()).of(None)
    assert rules.admin and rules.owns(Ownership(owner=ALICE, group="g", private=True))


def test_a_private_import_needs_the_service_account_in_its_group() -> None:
    accounts = MemoryAccounts()
    accounts.add_user("svc", SERVICE, SERVICE)
    accounts.add_user("alice", 1001, 1001)
    accounts.add_group("g", 3000, ("alice",))
    private = Ownership(owner=ALICE, group="g", private=True)
    with pytest.raises(Forbidden, match="svc is not in group g"):
        permissions(accounts).require_may_request(ALICE, private)
    accounts.add_member("g", "svc")
    permissions(accounts).require_may_request(ALICE, private)
    permissions(accounts).require_may_request(ALICE, Ownership(owner=ALICE, group="g"))
