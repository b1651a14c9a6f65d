"""Many users at once through the gateway (tests/gateway_lab.py): one job for one image, the
store settled whether or not anyone waits, a gateway that restarts, logs, cancel."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture

from gateway_lab import SOURCE, USERS, GatewayLab, gateway_lab
from slurm_image.application.lifecycle import Outcome
from slurm_image.application.orders import Orders
from slurm_image.domain.lifecycle_state import LifecycleState
from slurm_image.domain.orders import load_order_book
from slurm_image.gateway.app import create_app
from slurm_image.gateway.state import Gateway
from slurm_image.wire.remote_error import RemoteError


@pytest.fixture
def lab() -> Iterator[GatewayLab]:
    with gateway_lab("requests_per_minute = 100000") as running:
        yield running


def run_the_one_job_when_submitted(lab: GatewayLab, *, deadline_s: float = 60) -> threading.Thread:
    """In the background: once a job is submitted, wait a little for others to join, then
    write its result and complete it (as the one job the node runs)."""

    def run() -> None:
        end = time.monotonic() + deadline_s
        while not lab.scheduler.jobs and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(1.0)
        books = Path(lab.layout.orders)
        (book,) = list(books.glob("*.json"))
        lab.run_job(book.stem)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_ten_users_importing_one_digest_at_once_get_one_job_and_ten_aliases(
    lab: GatewayLab,
) -> None:
    users = list(USERS) + [f"u{i}" for i in range(6)]
    for index, user in enumerate(users[len(USERS) :]):
        lab.add_user(user, 23000 + index)
    runner = run_the_one_job_when_submitted(lab)
    outcomes: dict[str, Outcome | BaseException] = {}

    def ask(user: str) -> None:
        try:
            outcomes[user] = lab.client(user).import_image(
                SOURCE, name=f"img-of-{user}", role="client", wait=True, timeout_s=60
            )
        except BaseException as error:
            outcomes[user] = error

    threads = [threading.Thread(target=ask, args=(user,)) for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    runner.join(timeout=5)
    assert len(lab.scheduler.jobs) == 1, "one job for ten requests"
    published = {
        user: outcome for user, outcome in outcomes.items() if isinstance(outcome, Outcome)
    }
    assert set(published) == set(users), outcomes
    artifacts = {outcome.published.sqsh_sha256 for outcome in published.values()}  # type: ignore[union-attr]
    assert len(artifacts) == 1
    for user in users:
        owner = lab.alias_file(f"img-of-{user}")["owner"]
        assert owner == {"user": user, "uid": lab.uid(user)}
    assert sum(1 for o in published.values() if o.joined) == len(users) - 1
    assert not list(Path(lab.layout.orders).glob("*.json")), "the book is closed"


def test_an_import_nobody_waits_for_is_published_when_the_store_is_settled(
    lab: GatewayLab,
) -> None:
    outcome = lab.client("alice").import_image(SOURCE, name="a", role="client")
    joined = lab.client("bob").import_image(SOURCE, name="b", role="client")
    assert (joined.lifecycle_id, joined.joined) == (outcome.lifecycle_id, True)
    assert lab.local().settle().pending == [outcome.lifecycle_id]
    lab.run_job(outcome.lifecycle_id)
    settled = lab.local().settle()
    assert settled.published == [outcome.lifecycle_id]
    assert lab.alias_file("a")["owner"]["user"] == "alice"
    assert lab.alias_file("b")["owner"]["user"] == "bob"
    assert [(e["event"], e["alias"], e["user"]) for e in lab.history()] == [
        ("published", "a", "alice"),
        ("published", "b", "bob"),
    ]


def test_a_joined_request_whose_book_closes_while_it_publishes_still_gets_its_alias(
    lab: GatewayLab, mocker: MockerFixture
) -> None:
    """Between a joined request's right to publish being weighed (its order is in the book) and
    its publication, the lifecycle's owner publishes and so closes the book: the joined
    request is not refused for the order that was just fulfilled."""
    outcome = lab.client("alice").import_image(SOURCE, name="a", role="client")
    lab.client("bob").import_image(SOURCE, name="b", role="client")
    book_path = Path(lab.layout.order_book(outcome.lifecycle_id))
    bob_request = load_order_book(book_path.read_bytes()).orders[1].request
    lab.run_job(outcome.lifecycle_id)
    real_book = Orders.book
    owner_published: list[str] = []

    def book_then_the_owner_publishes(orders: Orders, lifecycle_id: str) -> Any:
        book = real_book(orders, lifecycle_id)
        if book is not None and not owner_published:
            owner_published.append(lifecycle_id)
            lab.local("alice").publish(lifecycle_id)
        return book

    mocker.patch.object(Orders, "book", book_then_the_owner_publishes)
    finished = lab.local("bob").finish(outcome.lifecycle_id, bob_request)
    assert owner_published == [outcome.lifecycle_id]
    assert not book_path.exists(), "the owner's publication closed the book"
    assert (finished.state, finished.joined) == (LifecycleState.PUBLISHED, True)
    assert finished.published is not None and finished.published.name == "b"
    assert lab.alias_file("b")["owner"]["user"] == "bob"


def test_a_failed_job_closes_its_book_and_nothing_is_published(lab: GatewayLab) -> None:
    outcome = lab.client("alice").import_image(SOURCE, name="a", role="client")
    lab.run_job(outcome.lifecycle_id, exit_code=79)
    assert lab.local().settle().closed == [outcome.lifecycle_id]
    assert not Path(lab.layout.alias("a")).exists()
    with pytest.raises(RemoteError) as raised:
        lab.client("alice").wait([outcome.lifecycle_id], timeout_s=5).lifecycles[0]
        lab.client("alice").publish(outcome.lifecycle_id)
    assert raised.value.exit_code == 4


def test_a_gateway_that_restarts_publishes_what_its_predecessor_started_and_the_waiter_gets_it(
    lab: GatewayLab,
) -> None:
    alice = lab.client("alice")
    result: dict[str, Any] = {}

    def wait_for_it() -> None:
        try:
            result["outcome"] = alice.import_image(
                SOURCE, name="a", role="client", wait=True, timeout_s=90
            )
        except BaseException as error:
            result["error"] = error

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    deadline = time.monotonic() + 30
    while not list(Path(lab.layout.orders).glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    (book,) = list(Path(lab.layout.orders).glob("*.json"))
    lab.stop()  # the gateway goes away (SIGTERM) while the client waits
    lab.run_job(book.stem)
    port = int(lab.url.rsplit(":", 1)[1])
    restarted = GatewayLab.__new__(GatewayLab)
    restarted.__dict__.update(lab.__dict__)
    restarted.app = create_app(Gateway(lifecycles=lab.lifecycles, who=lab.who))
    restarted.start_on(port)
    try:
        assert restarted.local().settle().published == [book.stem]
        waiter.join(timeout=60)
        assert "error" not in result, result.get("error")
        outcome = result["outcome"]
        assert outcome.state is LifecycleState.PUBLISHED
        assert outcome.published.name == "a"
        assert len(lab.scheduler.jobs) == 1
        assert [e["event"] for e in lab.history()] == ["published"]
    finally:
        restarted.stop()
        lab._server = None


def test_a_requester_who_joined_withdraws_only_their_own_order(lab: GatewayLab) -> None:
    outcome = lab.client("alice").import_image(SOURCE, name="a", role="client")
    lab.client("bob").import_image(SOURCE, name="b", role="client")
    status = lab.client("bob").cancel(outcome.lifecycle_id)
    assert str(status.state) != "CANCELLED", "the job stays for alice"
    lab.run_job(outcome.lifecycle_id)
    lab.local().settle()
    assert Path(lab.layout.alias("a")).exists()
    assert not Path(lab.layout.alias("b")).exists()


def test_a_requester_with_no_order_may_not_cancel_anothers_lifecycle(lab: GatewayLab) -> None:
    outcome = lab.client("alice").import_image(SOURCE, name="a", role="client")
    with pytest.raises(RemoteError) as raised:
        lab.client("dave").cancel(outcome.lifecycle_id)
    assert raised.value.exit_code == 11
    assert "alice" in raised.value.rule
    assert str(lab.client("alice").cancel(outcome.lifecycle_id).state) == "CANCELLED"


def test_the_queue_shows_who_waits_for_what(lab: GatewayLab) -> None:
    outcome = lab.client("alice").import_image(SOURCE, name="a", role="client")
    lab.client("bob").import_image(SOURCE, name="b", role="client")
    (entry,) = lab.client("carol").queue()
    assert entry["lifecycle_id"] == outcome.lifecycle_id
    assert entry["state"] == "PENDING"
    assert [(o["alias"], o["requester"]) for o in entry["orders"]] == [
        ("a", "alice"),
        ("b", "bob"),
    ]


def test_logs_stream_through_the_gateway(lab: GatewayLab) -> None:
    outcome = lab.client("alice").import_image(SOURCE, name="a", role="client")
    plan = lab.plan(outcome.lifecycle_id)
    stdout = plan.paths.stdout.replace("%j", outcome.job_id or "")
    Path(stdout).write_bytes(b"step 1\n\x1b[31mred\n")
    lab.run_job(outcome.lifecycle_id)
    pieces: list[tuple[str, bytes]] = []
    lab.client("alice").logs(outcome.lifecycle_id, lambda p, d: pieces.append((p, d)), follow=True)
    assert b"".join(data for path, data in pieces if path == stdout) == b"step 1\n\x1b[31mred\n"
