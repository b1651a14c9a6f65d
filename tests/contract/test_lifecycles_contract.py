"""One contract for the verbs the command line calls, run against both of its back ends: the
local use cases (``Lifecycles``, here acting for a requester as the gateway does) and the
gateway's client (``RemoteLifecycles`` over real HTTP to ``slurm-image serve``'s application).
Same calls, same types, same answers, same exit codes (docs/gateway.md, "The command line as its
client"). A new back end joins by adding its name to ``KINDS``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway_lab import PRIVATE_GROUP, SOURCE, GatewayLab, gateway_lab
from slurm_image.application.lifecycle import Outcome
from slurm_image.domain.credentials import RegistryCredentials
from slurm_image.domain.job import JobState
from slurm_image.domain.lifecycle_state import LifecycleState
from slurm_image.wire.errors import exit_code_for
from slurm_image.wire.exit_codes import EXIT_FORBIDDEN, EXIT_INVALID, EXIT_JOB_FAILED

KINDS = ["local", "remote"]
OTHER = f"registry.example.org/team/other:2@sha256:{'e' * 64}"


@pytest.fixture
def lab() -> Iterator[GatewayLab]:
    with gateway_lab("requests_per_minute = 100000") as running:
        yield running


@pytest.fixture(params=KINDS)
def verbs(request: pytest.FixtureRequest, lab: GatewayLab) -> Any:
    """alice's verbs, one way or the other."""
    return lab.local("alice") if request.param == "local" else lab.client("alice")


def exit_code_of(call: Any, *args: Any, **kwargs: Any) -> int:
    with pytest.raises(Exception) as raised:
        call(*args, **kwargs)
    return exit_code_for(raised.value)


def test_an_import_is_submitted_observed_waited_for_and_published(
    lab: GatewayLab, verbs: Any
) -> None:
    outcome = verbs.import_image(SOURCE, name="a", role="client")
    assert isinstance(outcome, Outcome)
    assert outcome.state is LifecycleState.SUBMITTED and outcome.job_id
    (status,) = verbs.status([outcome.lifecycle_id])
    assert (status.lifecycle_id, status.job_id, status.state) == (
        outcome.lifecycle_id,
        outcome.job_id,
        JobState.PENDING,
    )
    lab.run_job(outcome.lifecycle_id)
    waited = verbs.wait([outcome.lifecycle_id], timeout_s=10)
    assert not waited.timed_out and waited.lifecycles[0].state is JobState.COMPLETED
    record = verbs.publish(outcome.lifecycle_id)
    assert (record.name, record.role, record.architecture) == ("a", "client", "x86_64")
    assert verbs.resolve("a", verify=True).sqsh_sha256 == record.sqsh_sha256
    shown = verbs.catalog_show("a")
    assert shown.record["sqsh_sha256"] == record.sqsh_sha256
    assert shown.owned.user == "alice"
    assert [s["name"] for s in verbs.catalog_summaries()] == ["a"]
    assert verbs.architectures("a") == ("x86_64",)
    assert [e.event for e in verbs.history("a").events] == ["published"]


def test_import_wait_publishes_and_answers_the_record(lab: GatewayLab, verbs: Any) -> None:
    def run_when_submitted() -> None:
        deadline = time.monotonic() + 30
        while not list(Path(lab.layout.orders).glob("*.json")) and time.monotonic() < deadline:
            time.sleep(0.05)
        lab.run_job(next(Path(lab.layout.orders).glob("*.json")).stem)

    runner = threading.Thread(target=run_when_submitted, daemon=True)
    runner.start()
    seen: list[Any] = []
    outcome = verbs.import_image(
        SOURCE,
        name="a",
        role="client",
        wait=True,
        timeout_s=30,
        on_poll=lambda s, e: seen.append(s),
    )
    runner.join(timeout=5)
    assert outcome.state is LifecycleState.PUBLISHED
    assert outcome.published is not None and outcome.published.name == "a"
    assert seen and seen[-1][0].state is JobState.COMPLETED


def test_a_source_in_the_store_is_answered_from_it(lab: GatewayLab, verbs: Any) -> None:
    first = lab.local("bob").import_image(SOURCE, name="b", role="client")
    lab.run_job(first.lifecycle_id)
    lab.local("bob").wait([first.lifecycle_id], timeout_s=10)
    lab.local("bob").publish(first.lifecycle_id)
    outcome = verbs.import_image(SOURCE, name="a", role="client")
    assert outcome.from_store and outcome.state is LifecycleState.PUBLISHED
    assert outcome.published is not None and outcome.published.name == "a"
    assert len(lab.scheduler.jobs) == 1


def test_a_dry_run_plans_and_creates_nothing(lab: GatewayLab, verbs: Any) -> None:
    planned = verbs.plan("import_oci", SOURCE, name="a", role="client")
    assert planned.plan.request.name == "a"
    assert planned.plan.request.requester.user == "alice"
    assert planned.script.startswith("#!/bin/bash")
    assert not list(Path(lab.layout.jobs).glob("*")) if Path(lab.layout.jobs).exists() else True


def test_a_lifecycle_staged_only_is_submitted_later(lab: GatewayLab, verbs: Any) -> None:
    outcome = verbs.import_image(SOURCE, name="a", role="client", submit=False)
    assert outcome.state is LifecycleState.STAGED and outcome.job_id is None
    submission = verbs.submit(outcome.lifecycle_id)
    assert submission.lifecycle_id == outcome.lifecycle_id and submission.job_id


def test_a_wait_past_its_timeout_says_so(lab: GatewayLab, verbs: Any) -> None:
    outcome = verbs.import_image(SOURCE, name="a", role="client")
    result = verbs.wait([outcome.lifecycle_id], timeout_s=0.5)
    assert result.timed_out and result.lifecycles[0].state is JobState.PENDING


def test_a_cancelled_job_is_cancelled_and_its_failure_is_exit_4(
    lab: GatewayLab, verbs: Any
) -> None:
    outcome = verbs.import_image(SOURCE, name="a", role="client")
    assert verbs.cancel(outcome.lifecycle_id).state is JobState.CANCELLED
    assert exit_code_of(verbs.publish, outcome.lifecycle_id) == EXIT_JOB_FAILED


def test_unregister_removes_the_alias(lab: GatewayLab, verbs: Any) -> None:
    outcome = verbs.import_image(SOURCE, name="a", role="client")
    lab.run_job(outcome.lifecycle_id)
    verbs.wait([outcome.lifecycle_id], timeout_s=10)
    verbs.publish(outcome.lifecycle_id)
    assert verbs.unregister("a") == "a"
    assert exit_code_of(verbs.catalog_show, "a") == EXIT_INVALID
    assert [e.event for e in verbs.history("a").events] == ["published", "unregistered"]


@pytest.mark.parametrize(
    ("call", "args", "code"),
    [
        ("catalog_show", ("nope",), EXIT_INVALID),
        ("status", (["img-" + "0" * 32],), EXIT_INVALID),
        ("unregister", ("nope",), EXIT_INVALID),
        ("gc", (), EXIT_FORBIDDEN),
    ],
)
def test_refusals_have_the_same_exit_codes(
    lab: GatewayLab, verbs: Any, call: str, args: tuple[Any, ...], code: int
) -> None:
    kwargs = {"older_than": timedelta(days=1)} if call == "gc" else {}
    assert exit_code_of(getattr(verbs, call), *args, **kwargs) == code


def test_an_import_another_owns_is_refused_alike(lab: GatewayLab, verbs: Any) -> None:
    outcome = lab.local("bob").import_image(SOURCE, name="b", role="client")
    lab.run_job(outcome.lifecycle_id)
    lab.local("bob").wait([outcome.lifecycle_id], timeout_s=10)
    lab.local("bob").publish(outcome.lifecycle_id)
    assert exit_code_of(verbs.import_image, OTHER, name="b", role="client", replace=True) == (
        EXIT_FORBIDDEN
    )


@pytest.fixture(params=KINDS)
def outsider(request: pytest.FixtureRequest, lab: GatewayLab) -> Any:
    """bob's verbs, one way or the other: bob is not in the private group."""
    return lab.local("bob") if request.param == "local" else lab.client("bob")


def refusal_of(call: Any, *args: Any, **kwargs: Any) -> tuple[int, str, str]:
    with pytest.raises(Exception) as raised:
        call(*args, **kwargs)
    error: Any = raised.value
    return exit_code_for(error), error.field, error.rule


PRIVATE_ID_VERBS: list[tuple[str, Any]] = [
    ("status", lambda verbs, i: verbs.status([i])),
    ("wait", lambda verbs, i: verbs.wait([i], timeout_s=0)),
    ("logs", lambda verbs, i: verbs.logs(i, lambda _path, _data: None)),
    ("submit", lambda verbs, i: verbs.submit(i)),
    ("cancel", lambda verbs, i: verbs.cancel(i)),
    ("publish", lambda verbs, i: verbs.publish(i)),
    ("cleanup", lambda verbs, i: verbs.cleanup(i)),
]


@pytest.mark.parametrize("verb", PRIVATE_ID_VERBS, ids=[name for name, _ in PRIVATE_ID_VERBS])
def test_a_private_lifecycle_is_to_an_outsider_an_id_no_attempt_has(
    lab: GatewayLab, outsider: Any, verb: tuple[str, Any]
) -> None:
    login = RegistryCredentials(host="registry.example.org", login="alice", password="pw")
    outcome = lab.client("alice").import_image(
        SOURCE, name="s", role="client", group=PRIVATE_GROUP, credentials=login
    )
    lifecycle_id = outcome.lifecycle_id
    made_up = "img-" + "0" * 32
    _, call = verb
    code, field, rule = refusal_of(call, outsider, lifecycle_id)
    assert (code, field, rule.replace(lifecycle_id, "ID")) == (
        EXIT_INVALID,
        "lifecycle_id",
        f"no staged attempt ID in {lab.root}",
    )
    assert refusal_of(call, outsider, made_up) == (code, field, rule.replace(lifecycle_id, made_up))
    (status,) = lab.client("alice").status([lifecycle_id])
    assert status.state is JobState.PENDING, "nothing changed"


def test_logs_are_handed_over_piece_by_piece(lab: GatewayLab, verbs: Any) -> None:
    outcome = verbs.import_image(SOURCE, name="a", role="client")
    plan = lab.plan(outcome.lifecycle_id)
    stdout = plan.paths.stdout.replace("%j", outcome.job_id)
    Path(stdout).write_bytes(b"one\ntwo\n")
    lab.run_job(outcome.lifecycle_id)
    pieces: list[tuple[str, bytes]] = []
    verbs.logs(outcome.lifecycle_id, lambda path, data: pieces.append((path, data)))
    assert b"".join(d for p, d in pieces if p == stdout) == b"one\ntwo\n"
