"""Real ordinary accounts and groups, made by the tests with useradd and groupadd and removed
after the session (docs/testing.md, "Accounts of the tests' own").

The fixture ``ordinary_accounts`` (session scope; register it by importing it,
``from accounts import ordinary_accounts  # noqa: F401``) hands out accounts by role::

    shared = ordinary_accounts.group("shared")
    alice = ordinary_accounts.user("alice", groups=[shared])
    bob = ordinary_accounts.user("bob")

Asking for a role again in the session gives the same account; ``add_to_group`` changes a
membership (``usermod -aG``), ``remove_own_group`` leaves a primary gid without a name.

Names and ids belong to a slot, which a session holds with a lock (``flock`` on
``/run/lock/slurm-image-accounts-N.lock``, in /tmp where there is no /run/lock) until it has
removed its accounts: xdist worker ``gwN`` takes the first free slot from ``N`` on (slot ``N``
unless a concurrent test run on the machine holds it). Names are ``sigwN-ROLE`` and uids and gids
``20000 + 100 N + i`` in slot ``N``: a user's own group (same name, its primary group) has the
user's uid as its gid, ``i`` below 49 (``unused_uid`` is 49, which no account takes), and the
other groups take ``i`` from 50 on. So parallel workers and concurrent runs never make or remove
each other's accounts, and what a killed session left in its slot (the kernel released its lock)
is removed by the next holder before it makes an account of the same name or id. Each account
has a home of its own, ``/tmp/slurm-image-accounts-N-*/NAME`` (0700, its own), a shell
(``/bin/sh``) and no password. Making accounts needs root: without it the fixture skips locally
and fails under ``CI=true`` (``support.unavailable``).

Running something as one of them, with its groups:
- ``subprocess.run(argv, **alice.subprocess_options())``: Popen's ``user=``, ``group=`` and
  ``extra_groups=``, with ``HOME``, ``USER``, ``LOGNAME``, a fixed ``PATH`` and the home as the
  working directory;
- ``subprocess.run(alice.setpriv("slurm-image", "list"))``: util-linux's ``setpriv`` with
  ``--init-groups`` and ``--reset-env``, for a command line (``runuser -u sigw0-alice -- ...``
  works too);
- ``alice.become()`` in a forked child, before it acts: ``setgroups``, ``setgid``, ``setuid``
  and the same environment.

At the end of the session every account and group is removed (``userdel``, ``groupdel``) with its
home; a process still running as one of them is a test's leftover and fails the session, named.
"""

from __future__ import annotations

import contextlib
import fcntl
import grp
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from parallel import worker_index
from support import unavailable

FIRST_ID = 20000
IDS_PER_SLOT = 100
GROUPS_FROM = 50
SLOTS = 100
SLOT_LOCKS = "/run/lock" if Path("/run/lock").is_dir() else "/tmp"
PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
_ROLE = re.compile(r"[a-z][a-z0-9]{0,15}")
HOMES_PREFIX = "/tmp/slurm-image-accounts-"
_TOOLS = "/usr/sbin:/usr/bin:/sbin:/bin"
_LOCK_RETRIES = 40


@dataclass(frozen=True)
class OrdinaryGroup:
    name: str
    gid: int


@dataclass(frozen=True)
class OrdinaryAccount:
    name: str
    uid: int
    gid: int
    """Its own group's, ``group``: named as the account (``sigwN-ROLE``)."""
    group: str
    groups: tuple[OrdinaryGroup, ...]
    """Its other groups, as made; ``add_to_group`` adds to the system's, not to this."""
    home: str

    @property
    def environment(self) -> dict[str, str]:
        return {"HOME": self.home, "USER": self.name, "LOGNAME": self.name, "PATH": PATH}

    def subprocess_options(self) -> dict[str, Any]:
        return {
            "user": self.uid,
            "group": self.gid,
            "extra_groups": [group.gid for group in self.groups],
            "env": self.environment,
            "cwd": self.home,
        }

    def setpriv(self, *command: str) -> list[str]:
        return [
            "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--init-groups",
            "--reset-env",
            "--",
            *command,
        ]

    def become(self) -> None:
        """In a forked child: act as this account from here on (irreversibly)."""
        os.setgroups([self.gid, *(group.gid for group in self.groups)])
        os.setgid(self.gid)
        os.setuid(self.uid)
        os.environ.clear()
        os.environ.update(self.environment)
        os.chdir(self.home)


@dataclass
class OrdinaryAccounts:
    """One slot's accounts and groups, made on first request (``user``, ``group``)."""

    slot: int
    homes: Path
    users: dict[str, OrdinaryAccount] = field(default_factory=dict)
    groups: dict[str, OrdinaryGroup] = field(default_factory=dict)

    @classmethod
    @contextlib.contextmanager
    def claimed(cls, first_slot: int) -> Iterator[OrdinaryAccounts]:
        """The first free slot from ``first_slot`` on, held (``flock``) until every account
        made in it is removed."""
        for slot in range(first_slot, SLOTS):
            lock = os.open(
                f"{SLOT_LOCKS}/slurm-image-accounts-{slot}.lock",
                os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
            )
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(lock)
                continue
            try:
                homes = Path(tempfile.mkdtemp(prefix=f"slurm-image-accounts-{slot}-", dir="/tmp"))
                homes.chmod(0o755)
                accounts = cls(slot, homes)
                try:
                    yield accounts
                finally:
                    accounts.remove_all()
            finally:
                os.close(lock)
            return
        raise AssertionError(f"every slot of accounts from {first_slot} on is taken")

    @property
    def prefix(self) -> str:
        return f"sigw{self.slot}-"

    def name(self, role: str) -> str:
        if not _ROLE.fullmatch(role):
            raise ValueError(f"a role is a lower-case letter, then letters or digits: {role!r}")
        return f"{self.prefix}{role}"

    def group(self, role: str) -> OrdinaryGroup:
        if role in self.groups:
            return self.groups[role]
        if role in self.users:
            raise ValueError(f"{role!r} is a user's role, and its group's")
        if len(self.groups) >= IDS_PER_SLOT - GROUPS_FROM:
            raise ValueError("too many groups for one slot")
        made = OrdinaryGroup(self.name(role), self._id(GROUPS_FROM + len(self.groups)))
        _clear_leftover_group(made.name, made.gid, self.prefix)
        _tool("groupadd", f"--gid={made.gid}", made.name)
        self.groups[role] = made
        return made

    def user(
        self, role: str, groups: Sequence[OrdinaryGroup] = (), *, name: str | None = None
    ) -> OrdinaryAccount:
        """``name``: the test's own instead of ``sigwN-ROLE``, made with ``--badname`` (it may
        break useradd's usual rules), but beginning with the slot's prefix all the same."""
        if name is not None and not name.startswith(self.prefix):
            raise ValueError(f"an account's name begins with {self.prefix}")
        if role in self.users:
            known = self.users[role]
            if set(known.groups) != set(groups):
                raise ValueError(f"{known.name} was made with other groups")
            return known
        if role in self.groups:
            raise ValueError(f"{role!r} is a group's role")
        if len(self.users) >= GROUPS_FROM - 1:
            raise ValueError("too many users for one slot")
        uid = self._id(len(self.users))
        own_group = self.name(role)
        badname = ["--badname"] if name is not None else []
        name = own_group if name is None else name
        home = self.homes / name
        _clear_leftover_user(name, uid, self.prefix)
        _clear_leftover_group(own_group, uid, self.prefix)
        _tool("groupadd", f"--gid={uid}", own_group)
        supplementary = ["--groups", ",".join(group.name for group in groups)] if groups else []
        _tool(
            "useradd",
            f"--uid={uid}",
            f"--gid={uid}",
            *supplementary,
            f"--home-dir={home}",
            "--no-create-home",
            "--no-user-group",
            "--shell=/bin/sh",
            *badname,
            name,
        )
        home.mkdir(mode=0o700)
        os.chown(home, uid, uid)
        made = OrdinaryAccount(name, uid, uid, own_group, tuple(groups), str(home))
        self.users[role] = made
        return made

    def add_to_group(self, account: OrdinaryAccount, group: OrdinaryGroup) -> None:
        _tool("usermod", "--append", f"--groups={group.name}", account.name)

    def remove_own_group(self, account: OrdinaryAccount) -> None:
        """Leave ``account``'s primary gid without a group entry (``groupdel --force``)."""
        _tool("groupdel", "--force", account.group)

    def remove_all(self) -> None:
        """Remove every account and group; fail naming a process left running as one."""
        uids = {account.uid for account in self.users.values()}
        running = _processes_of(uids)
        for account in self.users.values():
            _tool("userdel", "--force", account.name)
            _tool("groupdel", account.group, missing_ok=True)  # userdel may have removed it
        for made in self.groups.values():
            _tool("groupdel", made.name, missing_ok=True)
        shutil.rmtree(self.homes, ignore_errors=True)
        self.users.clear()
        self.groups.clear()
        if running:
            raise AssertionError(f"processes left running as the tests' accounts: {running}")

    def unused_uid(self) -> int:
        """A uid of the slot's that no account has: the last of the users' (never made)."""
        return self._id(GROUPS_FROM - 1)

    def _id(self, index: int) -> int:
        return FIRST_ID + IDS_PER_SLOT * self.slot + index


@pytest.fixture(scope="session")
def ordinary_accounts() -> Iterator[OrdinaryAccounts]:
    if os.geteuid() != 0:
        unavailable("making real accounts needs root (useradd, groupadd)")
    if shutil.which("useradd", path=_TOOLS) is None:
        unavailable("useradd is not installed (Debian: passwd)")
    with OrdinaryAccounts.claimed(worker_index()) as accounts:
        yield accounts


def _tool(*argv: str, missing_ok: bool = False) -> None:
    """Run a shadow tool; retry while another worker holds the password or group file's lock."""
    for _ in range(_LOCK_RETRIES):
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            env={"PATH": _TOOLS, "LC_ALL": "C"},
            check=False,
        )
        if done.returncode == 0:
            return
        if missing_ok and "does not exist" in done.stderr:
            return
        if "lock" not in done.stderr:
            break
        time.sleep(0.25)
    raise AssertionError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")


def _clear_leftover_user(name: str, uid: int, prefix: str) -> None:
    for entry in _passwd_entries(name, uid):
        if not entry.pw_name.startswith(prefix):
            raise AssertionError(f"uid {uid} is taken by {entry.pw_name}, not a test's account")
        _tool("userdel", "--force", entry.pw_name)
        if entry.pw_dir.startswith(HOMES_PREFIX):
            shutil.rmtree(Path(entry.pw_dir).parent, ignore_errors=True)


def _clear_leftover_group(name: str, gid: int, prefix: str) -> None:
    for entry in _group_entries(name, gid):
        if not entry.gr_name.startswith(prefix):
            raise AssertionError(f"gid {gid} is taken by {entry.gr_name}, not a test's group")
        _tool("groupdel", entry.gr_name, missing_ok=True)


def _passwd_entries(name: str, uid: int) -> list[pwd.struct_passwd]:
    found: dict[str, pwd.struct_passwd] = {}
    with contextlib.suppress(KeyError):
        found[name] = pwd.getpwnam(name)
    with contextlib.suppress(KeyError):
        entry = pwd.getpwuid(uid)
        found[entry.pw_name] = entry
    return list(found.values())


def _group_entries(name: str, gid: int) -> list[grp.struct_group]:
    found: dict[str, grp.struct_group] = {}
    with contextlib.suppress(KeyError):
        found[name] = grp.getgrnam(name)
    with contextlib.suppress(KeyError):
        entry = grp.getgrgid(gid)
        found[entry.gr_name] = entry
    return list(found.values())


def _processes_of(uids: set[int]) -> list[str]:
    running = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            lines = status.read_text().splitlines()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in lines if ":\t" in line)
        real_uid = int(fields.get("Uid", "-1").split()[0])
        if real_uid in uids:
            running.append(f"{status.parent.name} ({fields.get('Name', '?')}, uid {real_uid})")
    return running
