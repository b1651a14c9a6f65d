"""The headers of every kind of answer over real HTTP (tests/gateway_lab.py): pages, API answers
and errors, whoever asks, carry the content security policy (no framing), no referrer, nosniff,
and ``Cache-Control: no-store``: each depends on who asks. The static assets, the same for
everyone, are revalidated instead."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from gateway_lab import GatewayLab, gateway_lab


@pytest.fixture(scope="module")
def lab() -> Iterator[GatewayLab]:
    with gateway_lab("requests_per_minute = 100000\nmax_body_bytes = 4096") as running:
        yield running


def ask(lab: GatewayLab, method: str, path: str, user: str | None, **kw: object) -> httpx.Response:
    headers = {"Authorization": f"Munge {lab.credential(user)}"} if user else {}
    return httpx.request(method, lab.url + path, headers=headers, timeout=30, **kw)  # type: ignore[arg-type]


ANSWERS = [
    ("GET", "/", "alice", 200, {}),
    ("GET", "/requests", "alice", 200, {}),
    ("GET", "/requests.json", "alice", 200, {}),
    ("GET", "/aliases/nope", "alice", 404, {}),
    ("GET", "/", None, 401, {}),
    ("GET", "/v1/aliases", "alice", 200, {}),
    ("GET", "/v1/queue", "bob", 200, {}),
    ("GET", "/v1/aliases/nope", "alice", 404, {}),
    ("GET", "/v1/aliases", None, 401, {}),
    ("POST", "/v1/lifecycles", "alice", 400, {"json": {"operation": "import_oci"}}),
    ("POST", "/v1/lifecycles", "alice", 413, {"content": b"x" * 5000}),
    ("POST", "/v1/gc", "alice", 403, {"json": {}}),
    ("GET", "/v1/aliases/%FF", "alice", 400, {}),
    ("GET", "/v2/nothing", "alice", 404, {}),
    ("GET", "/healthz", None, 200, {}),
    ("GET", "/metrics", None, 401, {}),
    ("GET", "/metrics", "service", 200, {}),  # the store's owner: an admin
    ("GET", "/static/nothing.js", None, 404, {}),
]


@pytest.mark.parametrize(
    ("method", "path", "user", "status", "send"),
    ANSWERS,
    ids=[f"{m} {p} {u} {s}" for m, p, u, s, _ in ANSWERS],
)
def test_every_answer_and_error_is_not_stored_framed_or_referred(
    lab: GatewayLab,
    method: str,
    path: str,
    user: str | None,
    status: int,
    send: dict[str, object],
) -> None:
    answer = ask(lab, method, path, user, **send)
    assert answer.status_code == status, answer.text
    assert answer.headers["cache-control"] == "no-store"
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    assert answer.headers["referrer-policy"] in ("no-referrer", "same-origin")
    assert answer.headers["x-content-type-options"] == "nosniff"


def test_the_static_assets_are_revalidated_not_kept_private(lab: GatewayLab) -> None:
    for name in ("catalog.js", "catalog.css"):
        answer = ask(lab, "GET", f"/static/{name}", None)
        assert answer.status_code == 200
        assert answer.headers["cache-control"] == "no-cache"
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]


def test_a_page_past_the_request_rate_is_not_stored() -> None:
    with gateway_lab("public_catalog = true\nrequests_per_minute = 1") as lab:
        assert ask(lab, "GET", "/", None).status_code == 200
        busy = ask(lab, "GET", "/", None)
    assert busy.status_code == 429
    assert busy.headers["cache-control"] == "no-store"
