"""One job for one image with the default profile (tests/gateway_lab.py with no ``arch`` in
``[image_build]``): imports that name no architecture coalesce on the one assumed, the
gateway's node's, and a job that built another is bound to nobody who joined it."""

from __future__ import annotations

import json
import platform
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway_lab import SOURCE, GatewayLab, gateway_lab
from slurm_image.application.lifecycle import Outcome
from slurm_image.domain.architecture import from_machine
from slurm_image.wire.remote_error import RemoteError

HERE = from_machine(platform.machine())
OTHER = "aarch64" if HERE != "aarch64" else "x86_64"

pytestmark = pytest.mark.skipif(HERE is None, reason="a machine of no architecture built for")


@pytest.fixture
def lab() -> Iterator[GatewayLab]:
    with gateway_lab("requests_per_minute = 100000", arch=None) as running:
        yield running


def books(lab: GatewayLab) -> list[dict[str, Any]]:
    return [json.loads(path.read_bytes()) for path in Path(lab.layout.orders).glob("*.json")]


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        time.sleep(0.05)


def test_two_users_importing_one_digest_get_one_job_and_both_their_aliases(
    lab: GatewayLab,
) -> None:
    outcomes: dict[str, Outcome | BaseException] = {}

    def ask(user: str) -> None:
        try:
            outcomes[user] = lab.client(user).import_image(
                SOURCE, name=f"img-of-{user}", role="client", wait=True, timeout_s=60
            )
        except BaseException as error:
            outcomes[user] = error

    alice = threading.Thread(target=ask, args=("alice",))
    alice.start()
    until(lambda: len(books(lab)) == 1, "alice's lifecycle is submitted")
    (book,) = books(lab)
    assert lab.plan(book["lifecycle_id"]).architecture is None, "the job imports for its node's"
    assert (book["architecture"], book["assumed"]) == (HERE, True)
    bob = threading.Thread(target=ask, args=("bob",))
    bob.start()
    until(lambda: len(books(lab)[0]["orders"]) == 2, "bob joins alice's lifecycle")
    lab.run_job(book["lifecycle_id"], architecture=HERE or "x86_64")
    for thread in (alice, bob):
        thread.join(timeout=90)
    assert len(lab.scheduler.jobs) == 1, "one job for two requests"
    assert all(isinstance(outcome, Outcome) for outcome in outcomes.values()), outcomes
    assert outcomes["bob"].joined  # type: ignore[union-attr]
    for user in ("alice", "bob"):
        alias = lab.alias_file(f"img-of-{user}")
        assert alias["owner"]["user"] == user
        assert [entry["architecture"] for entry in alias["entries"]] == [HERE]
    assert not books(lab), "the book is closed"


def test_a_job_that_built_another_architecture_binds_nobody_who_joined(
    lab: GatewayLab,
) -> None:
    started = lab.client("alice").import_image(SOURCE, name="a", role="client")
    result: dict[str, Any] = {}

    def bob_waits() -> None:
        try:
            lab.client("bob").import_image(SOURCE, name="b", role="client", wait=True, timeout_s=60)
        except RemoteError as error:
            result["error"] = error

    bob = threading.Thread(target=bob_waits)
    bob.start()
    until(lambda: len(books(lab)[0]["orders"]) == 2, "bob joins alice's lifecycle")
    lab.run_job(started.lifecycle_id, architecture=OTHER)
    bob.join(timeout=90)
    (entry,) = lab.alias_file("a")["entries"]
    assert entry["architecture"] == OTHER, "the lifecycle's own request gets what its node built"
    assert not Path(lab.layout.alias("b")).exists(), f"bob asked for {HERE}, not {OTHER}"
    error = result["error"]
    assert (error.field, error.exit_code) == ("architecture", 5)
    assert f"built {OTHER}, not the {HERE}" in error.rule
    assert not books(lab), "the book is closed"
    assert len(lab.scheduler.jobs) == 1


def test_an_import_naming_no_architecture_joins_only_one_naming_none_either(
    lab: GatewayLab,
) -> None:
    assumed = lab.client("alice").import_image(SOURCE, name="a", role="client")
    named = lab.client("bob").import_image(SOURCE, name="b", role="client", arch=HERE)
    also_assumed = lab.client("carol").import_image(SOURCE, name="c", role="client")
    assert (named.joined, named.lifecycle_id != assumed.lifecycle_id) == (False, True)
    assert (also_assumed.joined, also_assumed.lifecycle_id) == (True, assumed.lifecycle_id)
    assert len(lab.scheduler.jobs) == 2
