"""tests/accounts.py: the accounts it makes are real, a process run as one by any of the three
ways has its uid, gid and groups, a killed session's leftovers are replaced, and a process left
running as one fails the removal, named."""

from __future__ import annotations

import os
import pwd
import subprocess
from collections.abc import Iterator

import pytest

from accounts import OrdinaryAccount, OrdinaryAccounts, ordinary_accounts  # noqa: F401
from parallel import worker_index
from support import unavailable

SPARE_SLOTS = 50
"""Accounts made outside the session fixture take a slot from here on, where no xdist worker's
starts."""


def ids_seen(argv: list[str], **options: object) -> tuple[int, int, set[int], str]:
    done = subprocess.run(
        [*argv, "sh", "-c", 'echo "$(id -u) $(id -g) $(id -G) $HOME"'],
        capture_output=True,
        text=True,
        check=True,
        **options,  # type: ignore[call-overload]
    )
    uid, gid, *rest = done.stdout.split()
    *groups, home = rest
    return int(uid), int(gid), {int(group) for group in groups}, home


def expected(account: OrdinaryAccount) -> tuple[int, int, set[int], str]:
    return account.uid, account.gid, {account.gid, *(g.gid for g in account.groups)}, account.home


@pytest.fixture
def spare() -> Iterator[OrdinaryAccounts]:
    if os.geteuid() != 0:
        unavailable("making real accounts needs root (useradd, groupadd)")
    with OrdinaryAccounts.claimed(SPARE_SLOTS + worker_index()) as made:
        yield made


def test_an_account_is_in_the_user_database(ordinary_accounts: OrdinaryAccounts) -> None:  # noqa: F811
    account = ordinary_accounts.user("dbcheck")
    entry = pwd.getpwnam(account.name)
    assert (entry.pw_uid, entry.pw_gid, entry.pw_dir) == (account.uid, account.gid, account.home)
    slot = ordinary_accounts.slot
    assert account.name == f"sigw{slot}-dbcheck"
    assert 20000 + 100 * slot <= account.uid < 20000 + 100 * slot + 49
    assert ordinary_accounts.user("dbcheck") is account


def test_a_process_runs_with_the_accounts_ids_and_groups(
    ordinary_accounts: OrdinaryAccounts,  # noqa: F811
) -> None:
    shared = ordinary_accounts.group("runshared")
    account = ordinary_accounts.user("runner", [shared])
    assert ids_seen([], **account.subprocess_options()) == expected(account)
    assert ids_seen(account.setpriv()) == expected(account)


def test_a_forked_child_becomes_the_account(ordinary_accounts: OrdinaryAccounts) -> None:  # noqa: F811
    shared = ordinary_accounts.group("forkshared")
    account = ordinary_accounts.user("forker", [shared])
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        try:
            account.become()
            said = f"{os.getuid()} {os.getgid()} {sorted(os.getgroups())} {os.getcwd()}"
            os.write(write_end, said.encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as answer:
        said = answer.read()
    os.waitpid(child, 0)
    assert said == f"{account.uid} {account.gid} {sorted({account.gid, shared.gid})} {account.home}"


def test_a_held_slot_is_skipped(spare: OrdinaryAccounts) -> None:
    with OrdinaryAccounts.claimed(spare.slot) as next_free:
        assert next_free.slot > spare.slot
        assert next_free.user("elsewhere").uid >= 20000 + 100 * next_free.slot


def test_a_killed_sessions_leftover_is_replaced(spare: OrdinaryAccounts) -> None:
    killed = OrdinaryAccounts(spare.slot, spare.homes / "killed")
    killed.homes.mkdir()
    leftover = killed.user("leftover")  # never removed: its session "was killed"
    again = spare.user("leftover")
    assert (again.name, again.uid) == (leftover.name, leftover.uid)
    assert pwd.getpwnam(again.name).pw_dir == again.home != leftover.home


def test_a_process_left_running_fails_the_removal_named(spare: OrdinaryAccounts) -> None:
    account = spare.user("lingerer")
    sleeper = subprocess.Popen(["sleep", "60"], **account.subprocess_options())
    try:
        with pytest.raises(AssertionError, match=rf"{sleeper.pid} \(sleep, uid {account.uid}\)"):
            spare.remove_all()
    finally:
        sleeper.kill()
        sleeper.wait()
    with pytest.raises(KeyError):
        pwd.getpwnam(account.name)
