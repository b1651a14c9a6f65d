"""The gateway over real HTTP (tests/gateway_lab.py): a private lifecycle's id names nothing to
whoever may not see it (every route answers as for an id no attempt has), a lifecycle is
changed only by its owner, its group and the admins, and the figures are the admins'."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway_lab import PRIVATE_GROUP, SOURCE, GatewayLab, gateway_lab
from slurm_image.domain.credentials import RegistryCredentials
from slurm_image.wire.exit_codes import EXIT_FORBIDDEN, EXIT_INVALID

LOG_LINE = b"pulled registry.example.org/team/app\n"
OUTSIDERS = ("bob", "dave")
"""bob is in physics but not in the private group; dave is in neither."""


@pytest.fixture
def lab() -> Iterator[GatewayLab]:
    with gateway_lab('admins = ["carol"]') as running:
        yield running


def ask(
    lab: GatewayLab, user: str, method: str, path: str, body: dict[str, Any] | None = None
) -> httpx.Response:
    return httpx.request(
        method,
        lab.url + path,
        json=body,
        headers={"Authorization": f"Munge {lab.credential(user)}"},
        timeout=30,
    )


def import_as(
    lab: GatewayLab,
    user: str = "alice",
    *,
    private: bool,
    submit: bool = True,
    name: str = "secret",
) -> str:
    """``user`` imports ``SOURCE`` as ``name`` (``private``: with their own registry
    credentials, for the private group); the lifecycle's id."""
    options: dict[str, Any] = {"submit": submit}
    if private:
        login = RegistryCredentials(host="registry.example.org", login=user, password="pw")
        options |= {"group": PRIVATE_GROUP, "credentials": login}
    outcome = lab.client(user).import_image(SOURCE, name=name, role="client", **options)
    return outcome.lifecycle_id


def made_up(lifecycle_id: str) -> str:
    """An id of the same shape that no attempt has."""
    return lifecycle_id[:-4] + ("0000" if not lifecycle_id.endswith("0000") else "1111")


def running(lab: GatewayLab, *, private: bool = True) -> str:
    return import_as(lab, private=private)


def staged(lab: GatewayLab, *, private: bool = True) -> str:
    return import_as(lab, private=private, submit=False)


def succeeded(lab: GatewayLab, *, private: bool = True) -> str:
    lifecycle_id = import_as(lab, private=private)
    lab.run_job(lifecycle_id)
    return lifecycle_id


def failed(lab: GatewayLab, *, private: bool = True) -> str:
    lifecycle_id = import_as(lab, private=private)
    lab.run_job(lifecycle_id, exit_code=1)
    lab.client("alice").status([lifecycle_id])  # the first to observe it records its end
    return lifecycle_id


def with_logs(lab: GatewayLab, *, private: bool = True) -> str:
    lifecycle_id = succeeded(lab, private=private)
    plan = lab.plan(lifecycle_id)
    stdout = plan.paths.stdout.replace("%j", lab.job_of(lifecycle_id))
    Path(stdout).write_bytes(LOG_LINE)
    return lifecycle_id


FINISH = {
    "request": {"operation": "import_oci", "name": "mine", "role": "client", "source": SOURCE},
    "replace": False,
}
PRIVATE_FINISH = {
    "request": FINISH["request"] | {"group": PRIVATE_GROUP, "private": True},  # type: ignore[operator]
    "replace": False,
}
"""A request of the private lifecycle's group: its bytes back only aliases private to it."""


@dataclass(frozen=True)
class Route:
    name: str
    method: str
    path: str
    body: Callable[[str], dict[str, Any] | None]
    prepare: Callable[[GatewayLab], str]

    def __call__(self, lab: GatewayLab, user: str, lifecycle_id: str) -> httpx.Response:
        return ask(
            lab, user, self.method, self.path.format(id=lifecycle_id), self.body(lifecycle_id)
        )


def no_body(_: str) -> None:
    return None


ROUTES = (
    Route("status", "GET", "/v1/lifecycles?ids={id}", no_body, running),
    Route(
        "wait",
        "POST",
        "/v1/lifecycles/wait",
        lambda i: {"lifecycle_ids": [i], "timeout_s": 0},
        running,
    ),
    Route("logs", "GET", "/v1/lifecycles/{id}/logs", no_body, with_logs),
    Route("submit", "POST", "/v1/lifecycles/{id}/submit", no_body, staged),
    Route("finish", "POST", "/v1/lifecycles/{id}/finish", lambda _: PRIVATE_FINISH, succeeded),
    Route(
        "publish", "POST", "/v1/lifecycles/{id}/publish", lambda _: {"replace": False}, succeeded
    ),
    Route("cancel", "POST", "/v1/lifecycles/{id}/cancel", no_body, running),
    Route("cleanup", "POST", "/v1/lifecycles/{id}/cleanup", no_body, failed),
)


@pytest.mark.parametrize("seer", ["alice", "carol"])
@pytest.mark.parametrize("route", ROUTES, ids=[route.name for route in ROUTES])
def test_a_private_id_answers_an_outsider_as_an_id_no_attempt_has(
    lab: GatewayLab, route: Route, seer: str
) -> None:
    lifecycle_id = route.prepare(lab)
    unknown_id = made_up(lifecycle_id)
    for outsider in OUTSIDERS:
        unseen = route(lab, outsider, lifecycle_id)
        unknown = route(lab, outsider, unknown_id)
        assert unknown.status_code == 404, unknown.text
        assert unknown.json()["error"] == {
            "field": "lifecycle_id",
            "rule": f"no staged attempt {unknown_id} in {lab.root}",
            "exit_code": EXIT_INVALID,
        }
        assert (unseen.status_code, unseen.text.replace(lifecycle_id, "ID")) == (
            unknown.status_code,
            unknown.text.replace(unknown_id, "ID"),
        )
        assert "alice" not in unseen.text and PRIVATE_GROUP not in unseen.text
    real = route(lab, seer, lifecycle_id)
    if (route.name, seer) == ("finish", "carol"):
        # an admin outside the group sees the lifecycle, but may name no group she is not in
        assert real.status_code == 403, real.text
        assert real.json()["error"]["field"] == "group"
        return
    assert real.status_code == 200, real.text
    if route.name == "logs":
        assert base64.b64encode(LOG_LINE) in real.content


def test_the_outsiders_asking_changed_nothing(lab: GatewayLab) -> None:
    lifecycle_id = staged(lab)
    for route in ("submit", "cancel", "cleanup"):
        assert ask(lab, "bob", "POST", f"/v1/lifecycles/{lifecycle_id}/{route}").status_code == 404
    assert not lab.scheduler.jobs, "nothing was submitted"
    assert (Path(lab.layout.jobs) / lifecycle_id).is_dir(), "nothing was removed"
    assert lab.client("alice").submit(lifecycle_id).job_id


def test_status_of_many_ids_is_unknown_when_one_is_unseen(lab: GatewayLab) -> None:
    hidden = running(lab)
    public = import_as(lab, "dave", private=False)
    answer = ask(lab, "bob", "GET", f"/v1/lifecycles?ids={public}&ids={hidden}")
    assert answer.status_code == 404
    assert hidden in answer.json()["error"]["rule"]
    seen = ask(lab, "bob", "GET", f"/v1/lifecycles?ids={public}")
    assert [s["lifecycle_id"] for s in seen.json()["lifecycles"]] == [public]


def test_a_public_lifecycle_is_anyones_to_observe(lab: GatewayLab) -> None:
    lifecycle_id = with_logs(lab, private=False)
    bob = lab.client("bob")
    (status,) = bob.status([lifecycle_id])
    assert str(status.state) == "COMPLETED"
    assert not bob.wait([lifecycle_id], timeout_s=5).timed_out
    pieces: list[bytes] = []
    bob.logs(lifecycle_id, lambda _, data: pieces.append(data))
    assert b"".join(pieces) == LOG_LINE


def test_another_users_staged_lifecycle_is_theirs_to_submit(lab: GatewayLab) -> None:
    lifecycle_id = staged(lab, private=False)
    refused = ask(lab, "bob", "POST", f"/v1/lifecycles/{lifecycle_id}/submit")
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["field"] == "lifecycle_id"
    assert refused.json()["error"]["exit_code"] == EXIT_FORBIDDEN
    assert not lab.scheduler.jobs
    assert ask(lab, "carol", "POST", f"/v1/lifecycles/{lifecycle_id}/submit").status_code == 200


def test_another_users_lifecycle_is_theirs_to_publish(lab: GatewayLab) -> None:
    lifecycle_id = succeeded(lab, private=False)
    path = f"/v1/lifecycles/{lifecycle_id}/publish"
    refused = ask(lab, "bob", "POST", path, {"replace": False})
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["field"] == "lifecycle_id"
    assert not Path(lab.layout.alias("secret")).exists()
    assert ask(lab, "alice", "POST", path, {"replace": False}).status_code == 200
    assert lab.alias_file("secret")["owner"]["user"] == "alice"


def test_finishing_a_lifecycle_one_did_not_join_publishes_nothing(lab: GatewayLab) -> None:
    lifecycle_id = succeeded(lab, private=False)
    refused = ask(lab, "bob", "POST", f"/v1/lifecycles/{lifecycle_id}/finish", FINISH)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["field"] == "lifecycle_id"
    assert not Path(lab.layout.alias("secret")).exists()
    assert not Path(lab.layout.alias("mine")).exists()
    lab.local().settle()
    answer = ask(lab, "bob", "POST", f"/v1/lifecycles/{lifecycle_id}/finish", FINISH)
    assert answer.status_code == 200, "once published, the store answers bob's own request"
    assert lab.alias_file("mine")["owner"]["user"] == "bob"


def test_a_requester_who_joined_finishes_the_lifecycle_for_both(lab: GatewayLab) -> None:
    lifecycle_id = running(lab, private=False)
    joined = lab.client("bob").import_image(SOURCE, name="mine", role="client")
    assert (joined.lifecycle_id, joined.joined) == (lifecycle_id, True)
    lab.run_job(lifecycle_id)
    answer = ask(lab, "bob", "POST", f"/v1/lifecycles/{lifecycle_id}/finish", FINISH)
    assert answer.status_code == 200, answer.text
    assert lab.alias_file("mine")["owner"]["user"] == "bob"
    assert lab.alias_file("secret")["owner"]["user"] == "alice"


def test_a_joiners_cancel_withdraws_only_their_order(lab: GatewayLab) -> None:
    lifecycle_id = running(lab, private=False)
    lab.client("bob").import_image(SOURCE, name="mine", role="client")
    bob = lab.client("bob")
    bob.cancel(lifecycle_id)
    (entry,) = lab.client("carol").queue()
    assert entry["lifecycle_id"] == lifecycle_id
    assert entry["state"] == "PENDING", "alice's job still runs"
    assert [(o["alias"], o["requester"]) for o in entry["orders"]] == [("secret", "alice")]
    again = ask(lab, "bob", "POST", f"/v1/lifecycles/{lifecycle_id}/cancel")
    assert (again.status_code, again.json()["error"]["exit_code"]) == (403, EXIT_FORBIDDEN)
    assert lab.scheduler.job(lab.job_of(lifecycle_id)).state.name == "PENDING"


def test_a_failed_private_import_is_in_no_one_elses_history_nor_queue(lab: GatewayLab) -> None:
    lifecycle_id = failed(lab)
    assert [e.event for e in lab.client("alice").history().events] == ["job_failed"]
    for outsider in OUTSIDERS:
        client = lab.client(outsider)
        assert all(e.lifecycle_id != lifecycle_id for e in client.history().events)
        assert ask(lab, outsider, "GET", "/v1/history?name=secret").status_code == 404
        assert all(q["lifecycle_id"] != lifecycle_id for q in client.queue())
        rows = ask(lab, outsider, "GET", "/requests.json")
        assert rows.status_code == 200
        assert lifecycle_id not in rows.text and "secret" not in rows.text
    assert lifecycle_id in ask(lab, "carol", "GET", "/requests.json").text


def test_a_private_import_in_flight_is_in_no_one_elses_history_nor_queue(
    lab: GatewayLab,
) -> None:
    lifecycle_id = running(lab)
    lab.client("alice").cancel(lifecycle_id)
    assert [e.event for e in lab.client("carol").history().events] == ["cancelled"]
    for outsider in OUTSIDERS:
        assert not lab.client(outsider).history().events
        rows = ask(lab, outsider, "GET", "/requests.json")
        assert lifecycle_id not in rows.text and "secret" not in rows.text


def test_a_private_imports_events_stay_hidden_once_its_attempt_and_alias_are_gone(
    lab: GatewayLab,
) -> None:
    failed_id = failed(lab)
    lab.client("alice").cleanup(failed_id)
    published_id = succeeded(lab)
    alice = lab.client("alice")
    alice.publish(published_id)
    alice.unregister("secret")
    alice.cleanup(published_id)
    events = [(e.event, e.group, e.private) for e in alice.history().events]
    assert events == [
        ("job_failed", PRIVATE_GROUP, True),
        ("cleaned_up", PRIVATE_GROUP, True),
        ("published", PRIVATE_GROUP, True),
        ("unregistered", PRIVATE_GROUP, True),
        ("cleaned_up", PRIVATE_GROUP, True),
    ]
    assert len(lab.client("carol").history().events) == len(events)
    for outsider in OUTSIDERS:
        assert not lab.client(outsider).history().events
        assert ask(lab, outsider, "GET", "/v1/history?name=secret").status_code == 404
        assert "secret" not in ask(lab, outsider, "GET", "/requests.json").text


def test_a_failed_private_import_is_not_on_the_public_requests_page() -> None:
    with gateway_lab('public_catalog = true\nadmins = ["carol"]') as lab:
        lifecycle_id = failed(lab)
        public = import_as(lab, "dave", private=False, name="open")
        lab.run_job(public, exit_code=1)
        lab.client("dave").status([public])
        rows = httpx.get(lab.url + "/requests.json", timeout=30)
        assert rows.status_code == 200
        assert public in rows.text, "a public failure is anyone's to read"
        assert lifecycle_id not in rows.text and "secret" not in rows.text


def test_another_users_attempt_is_theirs_to_clean_up(lab: GatewayLab) -> None:
    lifecycle_id = failed(lab, private=False)
    refused = ask(lab, "bob", "POST", f"/v1/lifecycles/{lifecycle_id}/cleanup")
    assert (refused.status_code, refused.json()["error"]["field"]) == (403, "lifecycle_id")
    assert "alice" in refused.json()["error"]["rule"]
    assert (Path(lab.layout.jobs) / lifecycle_id).is_dir()
    assert ask(lab, "alice", "POST", f"/v1/lifecycles/{lifecycle_id}/cleanup").status_code == 200


def test_a_private_alias_is_unknown_to_an_outsider_by_name_on_every_route(
    lab: GatewayLab,
) -> None:
    lifecycle_id = succeeded(lab)
    lab.client("alice").publish(lifecycle_id)
    for path in ("/v1/aliases/{}", "/v1/aliases/{}?verify=true", "/v1/outdated?names={}"):
        hidden = ask(lab, "bob", "GET", path.format("secret"))
        never = ask(lab, "bob", "GET", path.format("never"))
        assert hidden.status_code == never.status_code == 404, path
        assert hidden.text.replace("secret", "X") == never.text.replace("never", "X")
    assert ask(lab, "alice", "GET", "/v1/outdated?names=secret").status_code == 200


def test_the_figures_are_for_the_admins(lab: GatewayLab) -> None:
    refused = ask(lab, "alice", "GET", "/metrics")
    assert refused.status_code == 403
    assert refused.json()["error"]["field"] == "metrics"
    assert refused.json()["error"]["exit_code"] == EXIT_FORBIDDEN
    assert httpx.get(lab.url + "/metrics", timeout=30).status_code == 401
    answer = ask(lab, "carol", "GET", "/metrics")
    assert answer.status_code == 200
    assert "slurm_image_aliases" in answer.text
