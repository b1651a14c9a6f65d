"""``ping`` through slurmrestd when no controller answers UP.

Slurm 24.11's slurmrestd answers ``/ping`` with a refused token as HTTP 200 with every
controller ``DOWN`` (measured on the local 24.11 cluster), and 26.05's with every controller not
``responding`` (recorded, tests/fixtures/slurmrest/local-slurmrestd-26.05.5__*): only a read that
needs the token tells a refused token (HTTP 511, error 1007) from a controller really down
(HTTP 502, 1800).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from slurm_image.adapters.slurmrest import RestSubmitter
from slurm_image.adapters.slurmrest.client import RestClient
from slurm_image.ports.submitter import SchedulerAuthError, SchedulerUnavailable
from slurm_image.submitters import RetryPolicy

URL = "unix:///nonexistent/slurmrestd.sock"
RECORDED = Path(__file__).resolve().parent.parent / "fixtures" / "slurmrest"
DOWN = {
    "errors": [],
    "warnings": [],
    "pings": [
        {"hostname": "ctl1", "pinged": "DOWN", "responding": False, "mode": "primary"},
    ],
}
REFUSED = {
    "errors": [
        {
            "description": "Unable to query nodes",
            "error_number": 1007,
            "error": "Protocol authentication error",
            "source": "_dump_nodes",
        }
    ]
}
UNREACHABLE = {
    "errors": [
        {
            "description": "Failure to query nodes",
            "error_number": 1800,
            "error": "Unable to contact slurm controller (connect failure)",
            "source": "_dump_nodes",
        }
    ]
}


def submitter(nodes: httpx.Response, seen: list[str]) -> RestSubmitter:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if request.url.path.endswith("/ping"):
            return httpx.Response(200, json=DOWN)
        if request.url.path.endswith("/nodes"):
            return nodes
        return httpx.Response(404, json={"errors": []})

    client = RestClient(URL, transport=httpx.MockTransport(handle))
    return RestSubmitter(
        url=URL, api_version="v0.0.42", client=client, retry_policy=RetryPolicy.immediate(2)
    )


def test_a_refused_token_behind_a_down_answer_is_an_auth_error() -> None:
    seen: list[str] = []
    with pytest.raises(SchedulerAuthError):
        submitter(httpx.Response(511, json=REFUSED), seen).ping()
    assert seen == ["/slurm/v0.0.42/ping", "/slurm/v0.0.42/nodes"]  # not retried


def test_a_controller_really_down_is_reported_by_name_after_the_retries() -> None:
    seen: list[str] = []
    with pytest.raises(SchedulerUnavailable) as caught:
        submitter(httpx.Response(502, json=UNREACHABLE), seen).ping()
    assert "ctl1" in caught.value.reason and "DOWN" in caught.value.reason
    assert "after 2 attempt" in caught.value.reason
    assert seen.count("/slurm/v0.0.42/ping") == 2


def test_a_second_request_refused_for_another_reason_leaves_the_pings_report() -> None:
    seen: list[str] = []
    other = {"errors": [{"description": "Unable to query nodes", "error_number": 9000}]}
    with pytest.raises(SchedulerUnavailable) as caught:
        submitter(httpx.Response(422, json=other), seen).ping()
    assert "ctl1" in caught.value.reason and "DOWN" in caught.value.reason


def test_a_controller_up_needs_no_second_request() -> None:
    seen: list[str] = []
    up = {"errors": [], "pings": [{"hostname": "ctl1", "pinged": "UP", "responding": True}]}

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(200, json=up)

    client = RestClient(URL, transport=httpx.MockTransport(handle))
    rest = RestSubmitter(url=URL, api_version="v0.0.42", client=client)
    assert "ctl1" in rest.ping()
    assert seen == ["/slurm/v0.0.42/ping"]


def _recorded(version: str, what: str) -> httpx.Response:
    [path] = RECORDED.glob(f"local-slurmrestd-26.05.5__{version}__{what}-http-*.json")
    return httpx.Response(int(path.stem.rsplit("-http-", 1)[1]), json=json.loads(path.read_text()))


@pytest.mark.parametrize("version", ["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"])
def test_26_05_answers_a_refused_token_as_an_auth_error(version: str) -> None:
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        what = "ping-bad-token" if request.url.path.endswith("/ping") else "nodes-bad-token"
        return _recorded(version, what)

    client = RestClient(URL, transport=httpx.MockTransport(handle))
    rest = RestSubmitter(url=URL, api_version=version, client=client)
    with pytest.raises(SchedulerAuthError):
        rest.ping()
    assert seen == [f"/slurm/{version}/ping", f"/slurm/{version}/nodes"]


@pytest.mark.parametrize("version", ["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"])
def test_26_05_names_its_primary_controller_up(version: str) -> None:
    client = RestClient(URL, transport=httpx.MockTransport(lambda _: _recorded(version, "ping-ok")))
    said = RestSubmitter(url=URL, api_version=version, client=client).ping()
    assert said.endswith("(primary) UP")
