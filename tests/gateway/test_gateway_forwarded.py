"""Forwarded headers over real HTTP (tests/gateway_lab.py): the client's address and scheme are
the connection's own unless ``[gateway] trusted_proxies`` names the peer; what a request says
of itself moves neither the history's host nor a per-host limit."""

from __future__ import annotations

import httpx
import pytest

from gateway_lab import GatewayLab, gateway_lab
from slurm_image.domain.profile import InvalidProfile, parse_profile
from slurm_image.gateway.who import Who
from slurm_image.wire.exit_codes import EXIT_NOT_AUTHENTICATED


def forged(n: int) -> dict[str, str]:
    return {"X-Forwarded-For": f"203.0.113.{n}", "X-Forwarded-Proto": "https"}


def asked_from(lab: GatewayLab, headers: dict[str, str]) -> list[str]:
    """The hosts the history names for a request of alice's sent with ``headers`` (a ``gc``,
    refused and recorded: she is no admin)."""
    answer = httpx.post(
        f"{lab.url}/v1/gc",
        json={},
        headers={"Authorization": f"Munge {lab.credential('alice')}"} | headers,
        timeout=30,
    )
    assert answer.status_code == 403, answer.text
    return [event["host"] for event in lab.history() if event["user"] == "alice"]


def test_a_forged_forwarded_for_names_no_host_in_the_history() -> None:
    with gateway_lab() as lab:
        hosts = asked_from(lab, forged(7))
    assert hosts and set(hosts) == {"127.0.0.1"}


def test_a_named_proxys_forwarded_for_is_the_clients_address() -> None:
    with gateway_lab('trusted_proxies = ["127.0.0.1"]') as lab:
        hosts = asked_from(lab, forged(7))
    assert hosts and set(hosts) == {"203.0.113.7"}


def test_a_proxy_network_is_named_as_a_network() -> None:
    with gateway_lab('trusted_proxies = ["127.0.0.0/8"]') as lab:
        hosts = asked_from(lab, forged(8))
    assert set(hosts) == {"203.0.113.8"}


def test_a_new_forwarded_for_per_request_does_not_escape_the_cap_on_recorded_401s() -> None:
    with gateway_lab("requests_per_minute = 3") as lab:
        for n in range(5):
            answer = httpx.get(f"{lab.url}/v1/aliases", headers=forged(n), timeout=10)
            assert answer.status_code == 401
        refused = [e for e in lab.history() if e["event"] == "refused"]
    assert len(refused) == 3
    assert all("(from 127.0.0.1)" in event["reason"] for event in refused)
    assert not any("203.0.113" in event["reason"] for event in refused)


def test_a_new_forwarded_for_per_request_does_not_escape_the_anonymous_rate() -> None:
    with gateway_lab("public_catalog = true\nrequests_per_minute = 2") as lab:
        answers = [httpx.get(f"{lab.url}/", headers=forged(n), timeout=30) for n in range(3)]
    assert [answer.status_code for answer in answers] == [200, 200, 429]
    assert "127.0.0.1 (no identity)" in answers[2].text


@pytest.mark.parametrize("trusted", ["", 'trusted_proxies = ["127.0.0.1"]'])
def test_forwarded_proto_never_makes_plain_http_count_as_https(trusted: str) -> None:
    with gateway_lab(trusted) as lab:
        gateway = lab.app.state.gateway
        gateway.who = Who(lab.accounts, lab.munge.authenticator(), plain_http_ok=False)
        answer = httpx.get(
            f"{lab.url}/v1/aliases",
            headers={"Authorization": f"Munge {lab.credential('alice')}"} | forged(1),
            timeout=10,
        )
    assert answer.status_code == 401
    assert answer.json()["error"] == {
        "field": "authorization",
        "rule": "over TCP the gateway answers HTTPS only",
        "exit_code": EXIT_NOT_AUTHENTICATED,
    }


@pytest.mark.parametrize(
    "proxies", [["login1.example.org"], ["10.0.0.1", "*"], ["10.0.0.0/33"], ["10.0.0.1"] * 101]
)
def test_trusted_proxies_are_ip_addresses_or_networks(proxies: list[str]) -> None:
    profile = {
        "workspace_root": "/tmp/ws",
        "image_build": {
            "partition": "cpu",
            "cpus_per_task": 1,
            "memory": "1G",
            "time_limit": "0:10:00",
        },
        "gateway": {"trusted_proxies": proxies},
    }
    with pytest.raises(InvalidProfile) as refused:
        parse_profile(profile)
    assert refused.value.field.startswith("gateway.trusted_proxies")
    assert "no IP address or network" in refused.value.rule or "at most 100" in refused.value.rule
