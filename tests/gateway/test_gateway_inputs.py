"""Bad input over real HTTP (tests/gateway_lab.py; domain/untrusted_request.py): a body that is
not UTF-8 JSON or nests too deep, NUL characters and broken UTF-8 in a body, a path or a query,
an overlong query value, a route or method that is not there: each is one 400 (or 404, 405)
naming its field and rule, says nothing of the gateway's insides, and stages nothing."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway_lab import SOURCE, GatewayLab, gateway_lab
from slurm_image.domain.untrusted_request import MAX_HEAD_BYTES, MAX_QUERY_TEXT, TEXT_RULE
from slurm_image.wire.exit_codes import EXIT_INVALID

IMPORT = {"operation": "import_oci", "source": SOURCE, "name": "a", "role": "client"}
DEEPER = "nests deeper than 32 levels"


@pytest.fixture(scope="module")
def lab() -> Iterator[GatewayLab]:
    with gateway_lab("requests_per_minute = 100000") as running:
        yield running


def refused(lab: GatewayLab, answer: httpx.Response, status: int = 400) -> dict[str, object]:
    """The error of ``answer``: the product's one body, nothing of the gateway's insides, and
    nothing staged."""
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"error"} and set(body["error"]) == {"field", "rule", "exit_code"}
    assert body["error"]["exit_code"] == EXIT_INVALID
    assert "Traceback" not in answer.text and ".py" not in answer.text
    assert str(lab.root) not in answer.text
    jobs = Path(lab.layout.jobs)
    assert not jobs.exists() or not list(jobs.iterdir()), "nothing staged"
    return {k: v for k, v in body["error"].items() if k != "exit_code"}


def send(lab: GatewayLab, method: str, path: str, content: bytes = b"") -> httpx.Response:
    headers = {"Authorization": f"Munge {lab.credential('alice')}"}
    if content:
        headers["Content-Type"] = "application/json"
    return httpx.request(method, lab.url + path, content=content, headers=headers, timeout=30)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("path", "content", "error"),
    [
        pytest.param(
            "/v1/lifecycles", b'{"operation": ', {"field": "body", "rule": "is not JSON"}, id="cut"
        ),
        pytest.param(
            "/v1/lifecycles",
            b'{"operation": "import_oci", "name": "\xff"}',
            {"field": "body", "rule": "must be JSON in UTF-8"},
            id="not-utf8",
        ),
        pytest.param(
            "/v1/lifecycles",
            '{"operation": "import_oci", "name": "a"}'.encode("utf-16"),
            {"field": "body", "rule": "must be JSON in UTF-8"},
            id="utf16",
        ),
        pytest.param(
            "/v1/lifecycles/img-x/finish",
            f'{{"request": {{"source": {nested(33)}}}}}'.encode(),
            {"field": "body", "rule": DEEPER},
            id="deep-field",
        ),
        pytest.param(
            "/v1/lifecycles", nested(100_000).encode(), {"field": "body", "rule": DEEPER}, id="deep"
        ),
    ],
)
def test_a_body_that_is_no_utf8_json_or_nests_too_deep_is_refused(
    lab: GatewayLab, path: str, content: bytes, error: dict[str, str]
) -> None:
    assert refused(lab, send(lab, "POST", path, content)) == error


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"name": "a\x00b"}, "name"),
        ({"source": SOURCE + "\x00"}, "source"),
        ({"name": "\ud800"}, "name"),
        (
            {"credentials": {"host": "registry.example.org", "login": "al\x00", "password": "p"}},
            "credentials.login",
        ),
        (
            {"credentials": {"host": "registry.example.org", "login": "a", "password": "p\x00"}},
            "credentials.password",
        ),
    ],
)
def test_a_nul_or_a_lone_surrogate_in_a_body_names_its_field(
    lab: GatewayLab, change: dict[str, object], field: str
) -> None:
    import json

    body = json.dumps(IMPORT | change).encode()
    assert refused(lab, send(lab, "POST", "/v1/lifecycles", body)) == {
        "field": field,
        "rule": TEXT_RULE,
    }


def test_a_nul_in_a_bodys_field_name_is_refused(lab: GatewayLab) -> None:
    body = b'{"operation": "import_oci", "na\\u0000me": "a"}'
    assert refused(lab, send(lab, "POST", "/v1/lifecycles", body)) == {
        "field": "body",
        "rule": f"its names {TEXT_RULE}",
    }


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/v1/aliases/%FF", {"field": "path", "rule": TEXT_RULE}),
        ("/v1/aliases/a%00b", {"field": "path", "rule": TEXT_RULE}),
        ("/aliases/%C3%28", {"field": "path", "rule": TEXT_RULE}),
        ("/v1/history?name=%FF", {"field": "name", "rule": TEXT_RULE}),
        ("/v1/history?name=a%00", {"field": "name", "rule": TEXT_RULE}),
        ("/v1/lifecycles?ids=img-1&ids=%E2%82", {"field": "ids", "rule": TEXT_RULE}),
        ("/v1/history?%FF=a", {"field": "query", "rule": f"its names {TEXT_RULE}"}),
        (
            f"/v1/lifecycles?ids={'i' * (MAX_QUERY_TEXT + 1)}",
            {"field": "ids", "rule": f"must be at most {MAX_QUERY_TEXT} characters"},
        ),
        (
            f"/v1/history?{'n' * 65}=a",
            {"field": "query", "rule": "its names must be at most 64 characters"},
        ),
    ],
)
def test_a_path_or_query_that_is_no_text_is_refused_naming_it(
    lab: GatewayLab, path: str, error: dict[str, str]
) -> None:
    assert refused(lab, send(lab, "GET", path)) == error


def test_the_same_rule_holds_before_any_identity_is_asked(lab: GatewayLab) -> None:
    answer = httpx.get(f"{lab.url}/v1/aliases/%FF", timeout=10)
    assert refused(lab, answer)["field"] == "path"


def test_a_route_or_method_that_is_not_there_is_the_products_error(lab: GatewayLab) -> None:
    assert refused(lab, send(lab, "GET", "/v2/anything"), 404) == {
        "field": "path",
        "rule": "names nothing here",
    }
    not_answered = send(lab, "PUT", "/v1/gc")
    assert refused(lab, not_answered, 405) == {"field": "method", "rule": "is not answered here"}
    assert "POST" in not_answered.headers["allow"]


@pytest.mark.parametrize("size", [33_000, 40_000])
def test_headers_past_their_bound_are_refused(lab: GatewayLab, size: int) -> None:
    answer = httpx.get(
        f"{lab.url}/v1/aliases",
        headers={"Authorization": f"Munge MUNGE:{'A' * size}:"},
        timeout=30,
    )
    assert refused(lab, answer) == {
        "field": "headers",
        "rule": f"must hold at most {MAX_HEAD_BYTES} bytes in all",
    }


def test_a_head_past_twice_its_bound_is_answered_400_and_closed(lab: GatewayLab) -> None:
    """The parser buffers an unfinished head without bound: the gateway counts what a
    connection sends until the head ends, in however many pieces it comes."""
    port = int(lab.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        start = b"GET /healthz HTTP/1.1\r\nHost: gateway\r\nX-Long: "
        connection.sendall(start)
        sent = len(start)
        while sent <= 2 * MAX_HEAD_BYTES:  # nothing past the piece that crosses the bound
            connection.sendall(b"a" * 4096)
            sent += 4096
        answer = b""
        while piece := connection.recv(4096):
            answer += piece
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert b"connection: close" in answer.lower()


def test_an_unknown_field_with_a_long_name_is_not_echoed(lab: GatewayLab) -> None:
    import json

    long_name = "sneaky" * 100
    body = json.dumps(IMPORT | {long_name: 1}).encode()
    answer = send(lab, "POST", "/v1/lifecycles", body)
    assert refused(lab, answer) == {"field": "body", "rule": "is not a known field"}
    assert long_name not in answer.text
