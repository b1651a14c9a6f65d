"""The gateway with real parts only (issue "One store for the whole site", docs/gateway.md):
``slurm-image serve`` run by a service account that is an ordinary user, real ordinary users
asking it with the real command line (``--gateway``) over its unix socket and over TCP with
MUNGE credentials of a munged the tests start, imports from the local registry run as jobs of
the real clusters (tests/integration/gateway_site.py says how the site is made).

Who may do what, what the history and the job's comment name, and the job run as the service
account are checked on every cluster: 22.05 submits with sbatch, 24.11 and 26.05 (whose client
wrappers need root) through slurmrestd with the service account's own JWT. MUNGE refusals and a
private image run on 22.05 alone; coalescing and a gateway killed during an import (the full
suite's) on 24.11 alone, where ten users' calls reach slurmrestd at once. What they check is the
gateway's and the store's, the same whatever submits the job."""

from __future__ import annotations

import contextlib
import json
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "execution"))

from gateway_site import GatewaySite, Runtime, node_accounts, world_runtime
from harness import AuthRegistry, auth_registry, registry_images  # noqa: F401  (fixtures)

from accounts import OrdinaryAccount, OrdinaryAccounts, ordinary_accounts  # noqa: F401
from clusters import Cluster, cluster
from munge_daemon import MungeDaemons, munge_daemons  # noqa: F401

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

ARCH = platform.machine()
FORBIDDEN, NOT_AUTHENTICATED, INVALID = 11, 12, 2
CONCURRENT_USERS = 10


@pytest.fixture(scope="module", params=["22.05"], ids=["slurm-22.05"])
def slurm_2205(request: pytest.FixtureRequest) -> Cluster:
    """Slurm 22.05 alone, for the checks that do not depend on the scheduler (see above)."""
    return cluster(str(request.param))


@pytest.fixture(scope="module", params=["24.11"], ids=["slurm-24.11"])
def slurm_2411(request: pytest.FixtureRequest) -> Cluster:
    """Slurm 24.11 alone, for the full suite's checks that do not depend on the scheduler."""
    return cluster(str(request.param))


@pytest.fixture
def images(request: pytest.FixtureRequest) -> dict[str, str]:
    """The local registry's test images (the execution suite's ``registry_images``)."""
    found: dict[str, str] = request.getfixturevalue("registry_images")
    return found


@pytest.fixture(scope="module")
def runtime() -> Iterator[Runtime]:
    with world_runtime() as made:
        yield made


class People:
    """The service account and the users of one cluster's tests."""

    def __init__(self, accounts: OrdinaryAccounts) -> None:
        self.team = accounts.group("team")
        self.service = accounts.user("svc", groups=[self.team])
        self.alice = accounts.user("alice", groups=[self.team])
        self.bob = accounts.user("bob")
        self.carol = accounts.user("carol", groups=[self.team])
        self.others = [accounts.user(f"user{i}") for i in range(CONCURRENT_USERS - 2)]

    @property
    def users(self) -> list[OrdinaryAccount]:
        return [self.service, self.alice, self.bob, self.carol, *self.others]


@pytest.fixture(scope="module")
def people(ordinary_accounts: OrdinaryAccounts) -> People:  # noqa: F811
    return People(ordinary_accounts)


@pytest.fixture
def site_on(
    world_readable_tmp: Path,
    people: People,
    runtime: Runtime,
    munge_daemons: MungeDaemons,  # noqa: F811
) -> Iterator[Any]:
    """``site_on(cluster, **options)``: a gateway site (its accounts in the node root too),
    started; stopped, and its accounts taken out of the node root, afterwards."""
    with contextlib.ExitStack() as stack:

        def make(local: Cluster, **options: Any) -> GatewaySite:
            stack.enter_context(node_accounts(local, people.users, [people.team]))
            base = world_readable_tmp / f"site-{local.series}"
            site = GatewaySite(base, local, people.service, runtime, munge_daemons, **options)
            stack.callback(site.close)
            site.start()
            return site

        yield make


def import_args(source: str, name: str, *more: str) -> list[str]:
    return ["import", source, "--name", name, "--role", "client", "--arch", ARCH, *more]


def test_an_alias_is_its_requester_s_and_the_job_the_service_account_s(
    local_slurm: Cluster, site_on: Any, people: People, images: dict[str, str]
) -> None:
    site: GatewaySite = site_on(local_slurm)
    alice, bob = people.alice, people.bob
    source = images["client"]

    published = site.json(alice, *import_args(source, "a", "--wait", "--timeout", "600"))

    assert (published["state"], published["from_store"]) == ("PUBLISHED", False), published
    assert site.alias("a")["owner"] == {"user": alice.name, "uid": alice.uid}
    shown = site.json(bob, "show", "a")
    assert shown["sqsh_sha256"] == published["sqsh_sha256"], shown

    replace = site.cli(bob, *import_args(source, "a", "--replace", "--wait"))
    assert replace.returncode == FORBIDDEN, site.failure(replace)
    assert alice.name in replace.stderr  # the refusal names the owner
    unregister = site.cli(bob, "unregister", "a")
    assert unregister.returncode == FORBIDDEN, site.failure(unregister)
    # over TCP the requester is the one the MUNGE credential names: bob, refused alike
    over_tcp = site.cli(bob, "unregister", "a", tcp=True)
    assert over_tcp.returncode == FORBIDDEN, site.failure(over_tcp)
    assert site.json(bob, "show", "a", tcp=True)["sqsh_sha256"] == published["sqsh_sha256"]
    assert site.alias("a")["owner"] == {"user": alice.name, "uid": alice.uid}

    events = site.json(bob, "history", "a")["events"]
    assert [(e["event"], e["user"], e["uid"]) for e in events] == [
        ("published", alice.name, alice.uid),
        *[("refused", bob.name, bob.uid)] * 3,  # bob's replace and two unregisters
    ], events
    assert {e["rule"] for e in events[1:]} == {"forbidden"}
    assert events[0]["job_id"] == published["job_id"]

    (job,) = site.jobs().values()
    assert job["JobId"] == published["job_id"]
    assert job["Comment"] == f"slurm-image:{published['lifecycle_id']};requester={alice.name}"
    assert job["UserId"] == f"{people.service.name}({people.service.uid})", job
    assert job["JobState"] == "COMPLETED", job


@pytest.mark.full_only
def test_ten_users_importing_one_digest_at_once_get_one_job_and_ten_aliases(
    slurm_2411: Cluster, site_on: Any, people: People, images: dict[str, str]
) -> None:
    site: GatewaySite = site_on(slurm_2411, hold=True)
    users = [people.alice, people.bob, *people.others]
    assert len(users) == CONCURRENT_USERS
    source = images["client"]
    asking = [
        site.background(user, *import_args(source, f"img{i}", "--wait", "--timeout", "600"))
        for i, user in enumerate(users)
    ]

    # every request joins the one book while its job is held (after its import, before its end)
    deadline = time.monotonic() + 300
    while not (books := site.open_books()) or len(books[0]["orders"]) < CONCURRENT_USERS:
        assert time.monotonic() < deadline, (books, site.log())
        assert all(p.poll() is None for p in asking), [p.communicate() for p in asking]
        time.sleep(0.2)
    site.release()
    answers = [process.communicate(timeout=600) for process in asking]

    for process, (out, err) in zip(asking, answers, strict=True):
        assert process.returncode == 0, site.failure(_Done(process.returncode, out, err))
    published = [json.loads(out) for out, _ in answers]
    assert len(books) == 1 and len(site.jobs()) == 1, site.jobs()
    assert {p["lifecycle_id"] for p in published} == {books[0]["lifecycle_id"]}
    assert len({p["sqsh_sha256"] for p in published}) == 1
    for i, user in enumerate(users):
        assert site.alias(f"img{i}")["owner"] == {"user": user.name, "uid": user.uid}
    events = site.history()
    assert sorted((e["event"], e["alias"], e["user"]) for e in events) == sorted(
        ("published", f"img{i}", user.name) for i, user in enumerate(users)
    )
    assert site.open_books() == []


@pytest.mark.full_only
def test_a_gateway_killed_during_an_import_loses_and_repeats_nothing(
    slurm_2411: Cluster, site_on: Any, people: People, images: dict[str, str]
) -> None:
    site: GatewaySite = site_on(slurm_2411, hold=True)
    alice, bob = people.alice, people.bob
    source = images["client"]
    waiting = site.background(alice, *import_args(source, "a", "--wait", "--timeout", "600"))
    site.wait_until_reached()  # submitted, running, held: it cannot end before its release
    joined = site.json(bob, *import_args(source, "b"))  # bob's import nobody waits for
    (book,) = site.open_books()
    assert joined["lifecycle_id"] == book["lifecycle_id"] and len(book["orders"]) == 2

    site.kill()
    assert waiting.poll() is None, waiting.communicate()  # the client asks again meanwhile
    site.start()
    site.release()
    out, err = waiting.communicate(timeout=600)

    assert waiting.returncode == 0, site.failure(_Done(waiting.returncode, out, err))
    published = json.loads(out)
    assert (published["state"], published["lifecycle_id"]) == ("PUBLISHED", book["lifecycle_id"])
    # bob's alias is published by the new gateway settling the store
    deadline = time.monotonic() + 120
    while site.open_books():
        assert time.monotonic() < deadline, (site.open_books(), site.log())
        time.sleep(0.5)
    assert site.alias("a")["owner"] == {"user": alice.name, "uid": alice.uid}
    assert site.alias("b")["owner"] == {"user": bob.name, "uid": bob.uid}
    assert site.json(bob, "show", "b")["sqsh_sha256"] == published["sqsh_sha256"]
    assert len(site.jobs()) == 1 and site.attempts() == {book["lifecycle_id"]}
    assert sorted((e["event"], e["alias"], e["user"]) for e in site.history()) == [
        ("published", "a", alice.name),
        ("published", "b", bob.name),
    ]


class _Done:
    """What ``GatewaySite.failure`` reads of a command run in the background."""

    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def _credential(user: OrdinaryAccount, socket: str, *more: str) -> str:
    """A MUNGE credential made as ``user`` by the munged on ``socket`` (``munge -n``)."""
    made = subprocess.run(
        user.setpriv("munge", "--no-input", "--socket", socket, *more),
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return made.stdout.strip()


def test_forged_replayed_expired_and_missing_munge_credentials_are_refused(
    slurm_2205: Cluster,
    site_on: Any,
    people: People,
    munge_daemons: MungeDaemons,  # noqa: F811
) -> None:
    site: GatewaySite = site_on(slurm_2205)
    alice = people.alice
    good = munge_daemons.good.socket

    def ask(credential: str | None) -> httpx.Response:
        headers = {"Authorization": f"Munge {credential}"} if credential else {}
        return httpx.get(f"{site.http_url}/v1/aliases", headers=headers, timeout=30)

    fresh = _credential(alice, good)
    expiring = _credential(alice, good, "--ttl", "1")
    accepted = ask(fresh)
    assert (accepted.status_code, accepted.json()) == (200, {"images": [], "next": None})

    refused = {
        "replayed": ask(fresh),
        "forged": ask(_credential(alice, munge_daemons.other.socket)),
        "missing": ask(None),
    }
    time.sleep(3)  # past the credential's one second to live
    refused["expired"] = ask(expiring)

    for case, answer in refused.items():
        assert answer.status_code == 401, (case, answer.text)
        error = answer.json()["error"]
        assert (error["field"], error["exit_code"]) == ("authorization", NOT_AUTHENTICATED), case
    assert "replayed" in refused["replayed"].json()["error"]["rule"]
    assert "another key" in refused["forged"].json()["error"]["rule"]
    assert "expired" in refused["expired"].json()["error"]["rule"]
    recorded = [e for e in site.history() if e["event"] == "refused"]
    assert [(e["rule"], e["exit_code"]) for e in recorded] == [
        ("unauthenticated", NOT_AUTHENTICATED)
    ] * len(refused)
    # the command line over TCP makes a new credential with the same munged for each request
    assert site.json(alice, "list", tcp=True) == {"images": []}


def test_a_private_image_is_its_group_s_alone(
    slurm_2205: Cluster,
    site_on: Any,
    people: People,
    world_readable_tmp: Path,
    request: pytest.FixtureRequest,
) -> None:
    registry: AuthRegistry = request.getfixturevalue("auth_registry")
    ca_file = world_readable_tmp / "ca.crt"  # where the job (the service account) reads it
    shutil.copy(registry.ca_file, ca_file)
    ca_file.chmod(0o644)
    alice, bob, carol, team = people.alice, people.bob, people.carol, people.team
    netrc = Path(alice.home) / ".config" / "enroot" / ".credentials"
    netrc.parent.mkdir(parents=True, exist_ok=True)
    netrc.write_text(
        f"machine {registry.host} login {registry.user} password {registry.password}\n"
    )
    netrc.chmod(0o600)
    subprocess.run(["chown", "-R", f"{alice.uid}:{alice.gid}", f"{alice.home}/.config"], check=True)
    try:
        site: GatewaySite = site_on(
            slurm_2205, standin_config={"ca_file": str(ca_file)}, plain_http=False
        )
        source = registry.images["client"]
        published = site.json(
            alice, *import_args(source, "p", "--group", team.name, "--wait", "--timeout", "600")
        )
    finally:
        netrc.unlink()

    assert published["state"] == "PUBLISHED", published
    alias = site.alias("p")
    assert (alias["owner"]["user"], alias["group"], alias["private"]) == (
        alice.name,
        team.name,
        True,
    )
    artifact = Path(published["path"]).stat()
    assert (oct(artifact.st_mode & 0o7777), artifact.st_gid) == ("0o440", team.gid)

    # a member of the group sees it everywhere; a user outside it nowhere
    assert site.json(carol, "show", "p")["sqsh_sha256"] == published["sqsh_sha256"]
    assert [i["name"] for i in site.json(carol, "list")["images"]] == ["p"]
    assert [e["alias"] for e in site.json(carol, "history")["events"]] == ["p"]
    hidden = site.cli(bob, "show", "p")
    assert hidden.returncode == INVALID, site.failure(hidden)
    assert site.json(bob, "list") == {"images": []}
    assert site.json(bob, "history")["events"] == []
    named = site.cli(bob, "history", "p")
    assert named.returncode == INVALID, site.failure(named)
    answer = httpx.get(
        f"{site.http_url}/v1/aliases/p",
        headers={"Authorization": f"Munge {_credential(bob, site.munge.good.socket)}"},
        timeout=30,
    )
    assert answer.status_code == 404, answer.text
