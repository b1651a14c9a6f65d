"""The gateway's HTTP surface (tests/gateway_lab.py): who is asking over TCP, bad input,
limits, the error body, and what is never said."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway_lab import SOURCE, GatewayLab, gateway_lab
from slurm_image.adapters.memory.munge import MemoryMunge
from slurm_image.adapters.system_clock import SystemClock
from slurm_image.wire.exit_codes import EXIT_BUSY, EXIT_INVALID, EXIT_NOT_AUTHENTICATED

IMPORT = {"operation": "import_oci", "source": SOURCE, "name": "a", "role": "client"}


@pytest.fixture
def lab() -> Iterator[GatewayLab]:
    with gateway_lab("requests_per_minute = 1000\nmax_body_bytes = 4096") as running:
        yield running


def post(
    lab: GatewayLab, path: str, body: Any, *, credential: str | None, **kw: Any
) -> httpx.Response:
    headers = {} if credential is None else {"Authorization": f"Munge {credential}"}
    headers |= kw.pop("headers", {})
    timeout = kw.pop("timeout", 30)
    return httpx.post(f"{lab.url}{path}", headers=headers, timeout=timeout, **({"json": body} | kw))


def error_of(answer: httpx.Response) -> dict[str, Any]:
    body = answer.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"field", "rule", "exit_code"}
    return dict(body["error"])


def nothing_staged(lab: GatewayLab) -> bool:
    jobs = Path(lab.layout.jobs)
    return not jobs.exists() or not list(jobs.iterdir())


def test_a_tcp_request_without_a_credential_is_refused(lab: GatewayLab) -> None:
    answer = httpx.get(f"{lab.url}/v1/aliases", timeout=10)
    assert answer.status_code == 401
    assert error_of(answer) == {
        "field": "authorization",
        "rule": "a request over TCP carries 'Authorization: Munge <credential>'",
        "exit_code": EXIT_NOT_AUTHENTICATED,
    }


@pytest.mark.parametrize(
    "credential",
    [
        pytest.param("MUNGE:bm90IGEgY3JlZGVudGlhbA==:", id="garbage"),
        pytest.param("not even armored", id="not-armored"),
        pytest.param(None, id="another-key"),
    ],
)
def test_a_forged_credential_is_refused(lab: GatewayLab, credential: str | None) -> None:
    if credential is None:
        credential = MemoryMunge(clock=SystemClock(), key=b"another key").encode(21001, 21001)
    answer = httpx.get(
        f"{lab.url}/v1/aliases", headers={"Authorization": f"Munge {credential}"}, timeout=10
    )
    assert answer.status_code == 401
    assert error_of(answer)["exit_code"] == EXIT_NOT_AUTHENTICATED


def test_a_replayed_credential_is_refused(lab: GatewayLab) -> None:
    credential = lab.credential("alice")
    first = httpx.get(f"{lab.url}/v1/aliases", headers={"Authorization": f"Munge {credential}"})
    again = httpx.get(f"{lab.url}/v1/aliases", headers={"Authorization": f"Munge {credential}"})
    assert first.status_code == 200
    assert again.status_code == 401
    assert "replayed" in error_of(again)["rule"].lower()


def test_an_expired_credential_is_refused(lab: GatewayLab) -> None:
    credential = lab.munge.encode(21001, 21001, ttl_s=-1)
    answer = httpx.get(f"{lab.url}/v1/aliases", headers={"Authorization": f"Munge {credential}"})
    assert answer.status_code == 401
    assert "expired" in error_of(answer)["rule"].lower()


def test_an_unknown_account_is_refused(lab: GatewayLab) -> None:
    credential = lab.munge.encode(4242, 4242)
    answer = httpx.get(f"{lab.url}/v1/aliases", headers={"Authorization": f"Munge {credential}"})
    assert answer.status_code == 401
    assert "4242" in error_of(answer)["rule"]


def test_malformed_json_is_a_400_and_creates_nothing(lab: GatewayLab) -> None:
    answer = post(
        lab,
        "/v1/lifecycles",
        None,
        credential=lab.credential("alice"),
        content=b'{"operation": "import_oci", ',
        headers={"Content-Type": "application/json"},
    )
    assert answer.status_code == 400
    assert error_of(answer)["exit_code"] == EXIT_INVALID
    assert nothing_staged(lab)


def test_an_unknown_field_is_named(lab: GatewayLab) -> None:
    answer = post(lab, "/v1/lifecycles", IMPORT | {"sneaky": 1}, credential=lab.credential("alice"))
    assert answer.status_code == 400
    assert error_of(answer) == {
        "field": "sneaky",
        "rule": "is not a known field",
        "exit_code": EXIT_INVALID,
    }
    assert nothing_staged(lab)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"source": "registry.example.org/team/app:1"}, "source"),
        ({"name": "../etc"}, "name"),
        ({"role": "admin"}, "role"),
        ({"arch": "sparc"}, "arch"),
    ],
)
def test_a_bad_request_names_its_field_and_creates_nothing(
    lab: GatewayLab, change: dict[str, str], field: str
) -> None:
    answer = post(lab, "/v1/lifecycles", IMPORT | change, credential=lab.credential("alice"))
    assert answer.status_code == 400, answer.text
    error = error_of(answer)
    assert (error["field"], error["exit_code"]) == (field, EXIT_INVALID)
    assert nothing_staged(lab)


def test_an_oversized_body_is_a_413(lab: GatewayLab) -> None:
    answer = post(
        lab,
        "/v1/lifecycles",
        IMPORT | {"source": "x" * 5000},
        credential=lab.credential("alice"),
    )
    assert answer.status_code == 413
    assert error_of(answer)["field"] == "body"
    assert nothing_staged(lab)


def test_an_unknown_alias_is_a_404(lab: GatewayLab) -> None:
    answer = httpx.get(
        f"{lab.url}/v1/aliases/nope", headers={"Authorization": f"Munge {lab.credential('bob')}"}
    )
    assert answer.status_code == 404
    assert error_of(answer)["field"] == "name"


def test_past_the_request_rate_a_requester_is_told_when_to_ask_again() -> None:
    with gateway_lab("requests_per_minute = 2") as lab:
        answers = [
            httpx.get(
                f"{lab.url}/v1/aliases",
                headers={"Authorization": f"Munge {lab.credential('alice')}"},
            )
            for _ in range(3)
        ]
        assert [a.status_code for a in answers] == [200, 200, 429]
        assert int(answers[2].headers["Retry-After"]) >= 1
        assert error_of(answers[2])["exit_code"] == EXIT_BUSY
        other = httpx.get(
            f"{lab.url}/v1/aliases", headers={"Authorization": f"Munge {lab.credential('bob')}"}
        )
        assert other.status_code == 200, "the rate is each requester's own"


def test_past_max_active_per_user_an_import_is_busy_and_stages_nothing() -> None:
    with gateway_lab("max_active_per_user = 1") as lab:
        alice = lab.client("alice")
        alice.import_image(SOURCE, name="a", role="client")
        other = f"registry.example.org/team/other:2@sha256:{'e' * 64}"
        with pytest.raises(Exception) as raised:
            alice.import_image(other, name="b", role="client")
        assert getattr(raised.value, "exit_code", None) == EXIT_BUSY
        assert getattr(raised.value, "retry_after_s", 0) > 0
        assert len(list(Path(lab.layout.jobs).iterdir())) == 1
        assert lab.client("bob").import_image(other, name="b", role="client").job_id


def test_an_internal_error_is_no_traceback(
    lab: GatewayLab, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("secret detail /etc/shadow")

    monkeypatch.setattr(type(lab.lifecycles), "catalog_page", broken)
    answer = httpx.get(
        f"{lab.url}/v1/aliases", headers={"Authorization": f"Munge {lab.credential('bob')}"}
    )
    assert answer.status_code == 500
    assert "secret detail" not in answer.text
    assert "Traceback" not in answer.text
    assert error_of(answer)["exit_code"] == 1


def test_healthz_needs_no_identity_and_metrics_the_store_owners(lab: GatewayLab) -> None:
    assert httpx.get(f"{lab.url}/healthz").json() == {"ok": True}
    assert httpx.get(f"{lab.url}/metrics").status_code == 401
    metrics = httpx.get(
        f"{lab.url}/metrics", headers={"Authorization": f"Munge {lab.credential(lab.service)}"}
    )
    assert metrics.status_code == 200
    assert "slurm_image_aliases" in metrics.text


def test_the_committed_openapi_document_is_the_gateways() -> None:
    with gateway_lab(http=False) as lab:
        current = lab.app.openapi()
    committed = json.loads((Path(__file__).parents[2] / "docs/gateway-openapi.json").read_text())
    assert committed == current, (
        "docs/gateway-openapi.json is stale: regenerate it with"
        " `.venv/bin/python scripts/gateway-openapi`"
    )


def test_munged_down_is_a_503_naming_its_socket(lab: GatewayLab) -> None:
    credential = lab.credential("alice")
    lab.munge.stop()
    answer = httpx.get(f"{lab.url}/v1/aliases", headers={"Authorization": f"Munge {credential}"})
    assert answer.status_code == 503
    error = error_of(answer)
    assert error["exit_code"] == 3
    assert lab.munge.socket in error["field"] + error["rule"]


def test_the_scheduler_down_is_a_503_and_leaves_no_lifecycle_in_flight(lab: GatewayLab) -> None:
    lab.scheduler.reachable = False
    answer = post(lab, "/v1/lifecycles", IMPORT, credential=lab.credential("alice"))
    assert answer.status_code == 503
    assert error_of(answer)["exit_code"] == 3
    assert not list(Path(lab.layout.orders).glob("*.json")), "no book: nothing to settle"
    assert lab.scheduler.jobs == {}


def test_a_client_that_goes_away_mid_wait_changes_nothing(lab: GatewayLab) -> None:
    started = post(lab, "/v1/lifecycles", IMPORT, credential=lab.credential("alice")).json()
    with pytest.raises(httpx.ReadTimeout):
        post(
            lab,
            "/v1/lifecycles/wait",
            {"lifecycle_ids": [started["lifecycle_id"]], "timeout_s": 5},
            credential=lab.credential("alice"),
            timeout=0.5,
        )
    status = httpx.get(
        f"{lab.url}/v1/lifecycles",
        params={"ids": started["lifecycle_id"]},
        headers={"Authorization": f"Munge {lab.credential('alice')}"},
    ).json()["lifecycles"][0]
    assert status["state"] == "PENDING"
    assert lab.scheduler.job(started["job_id"]).state.value == "PENDING"
    lab.run_job(started["lifecycle_id"])
    assert lab.local().settle().published == [started["lifecycle_id"]]


def test_a_401_is_a_refusal_in_the_history_and_a_flood_of_them_is_bounded() -> None:
    with gateway_lab("requests_per_minute = 3") as lab:
        for _ in range(5):
            assert httpx.get(f"{lab.url}/v1/aliases").status_code == 401
        refused = [e for e in lab.history() if e["event"] == "refused"]
        assert len(refused) == 3, "at most requests_per_minute recorded per host and minute"
        assert {(e["rule"], e["exit_code"], e["user"]) for e in refused} == {
            ("unauthenticated", EXIT_NOT_AUTHENTICATED, lab.service)
        }
        assert "127.0.0.1" in refused[0]["reason"]
        metrics = httpx.get(
            f"{lab.url}/metrics",
            headers={"Authorization": f"Munge {lab.credential(lab.service)}"},
        ).text.splitlines()
        (counted,) = [line for line in metrics if 'rule="unauthenticated"' in line]
        assert counted.startswith("slurm_image_refusals_total{") and counted.endswith(" 3.0")


@pytest.mark.parametrize("timeout", ["0", "-1", "1e9", "soon"])
def test_outdateds_timeout_is_bounded_as_the_command_lines(lab: GatewayLab, timeout: str) -> None:
    answer = httpx.get(
        f"{lab.url}/v1/outdated",
        params={"timeout_s": timeout},
        headers={"Authorization": f"Munge {lab.credential('alice')}"},
    )
    assert answer.status_code == 400
    assert error_of(answer)["field"] == "timeout_s"


def test_a_tag_the_policy_refuses_to_resolve_or_check_is_a_refusal_in_the_history(
    lab: GatewayLab,
) -> None:
    from slurm_image.application.lifecycle import LifecycleOptions
    from slurm_image.domain.policy import Policy
    from slurm_image.domain.request import make_request
    from slurm_image.domain.resolution import ResolvedFrom
    from slurm_image.wire.remote_error import RemoteError

    tag, digest = SOURCE.split("@")
    resolved = ResolvedFrom(tag=tag, digest=digest, resolved_at="2026-01-01T00:00:00.000000Z")
    request = make_request(
        "import_oci", name="app", role="client", source=SOURCE, resolved_from=resolved
    )
    site = lab.lifecycles
    started = site.container.lifecycle()(request, site.profile, site.selection, LifecycleOptions())
    lab.run_job(started.lifecycle_id)
    assert lab.local().settle().published == [started.lifecycle_id]
    strict = Policy.model_validate({"allowed_registries": ["registry.site.example"]})
    site.profile = site.profile.model_copy(update={"policy": strict})  # the site's policy changes

    with pytest.raises(RemoteError) as raised:
        lab.client("bob").resolve_tag(tag)
    assert raised.value.exit_code == EXIT_INVALID
    (entry,) = lab.client("alice").outdated()
    assert (entry.name, str(entry.state)) == ("app", "failed")

    refused = [e for e in lab.history() if e["event"] == "refused"]
    assert [(e["rule"], e["user"], e["source"], e["alias"]) for e in refused] == [
        ("source_not_allowed", "bob", tag, None),
        ("source_not_allowed", "alice", tag, "app"),
    ]
    admin = {"Authorization": f"Munge {lab.credential(lab.service)}"}
    metrics = httpx.get(f"{lab.url}/metrics", headers=admin).text.splitlines()
    (counted,) = [line for line in metrics if 'rule="source_not_allowed"' in line]
    assert counted.startswith("slurm_image_refusals_total{") and counted.endswith(" 2.0")
