"""What the gateway's web stack adds to a ``show`` and a page of ``list`` (tests/gateway_lab.py,
its application called in this process): one hand-off to the thread pool to tell who asks, and
one to read the store and encode the answer, once the requester's verbs are built; the answer
is the compact UTF-8 JSON of what the same verbs read without HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any
from unittest import mock

import anyio.to_thread
import httpx
import pytest

from gateway_lab import SOURCE, GatewayLab, gateway_lab
from slurm_image.domain.listing import ListQuery
from slurm_image.wire import shapes

NAMES = ("app-a", "app-b", "app-c")


@pytest.fixture(scope="module")
def lab() -> Iterator[GatewayLab]:
    with gateway_lab(http=False) as running:
        first = running.local("alice").import_image(SOURCE, name=NAMES[0], role="client")
        running.run_job(first.lifecycle_id)
        assert running.local().settle().published == [first.lifecycle_id]
        for name in NAMES[1:]:
            assert running.local("alice").import_image(SOURCE, name=name, role="client").from_store
        yield running


def ask(lab: GatewayLab, path: str, user: str = "carol") -> tuple[httpx.Response, int]:
    """``GET path`` of the gateway's application as ``user``, and how many functions it handed
    to the thread pool meanwhile."""
    handed: list[Any] = []
    run_sync = anyio.to_thread.run_sync

    async def counted(func: Any, *args: Any, **kwargs: Any) -> Any:
        handed.append(func)
        return await run_sync(func, *args, **kwargs)

    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=lab.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            credential = {"Authorization": f"Munge {lab.credential(user)}"}
            return await client.get(path, headers=credential)

    with mock.patch.object(anyio.to_thread, "run_sync", counted):
        answer = asyncio.run(get())
    return answer, len(handed)


def compact(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def test_a_show_hands_the_thread_pool_who_asks_and_the_read(lab: GatewayLab) -> None:
    first, _ = ask(lab, f"/v1/aliases/{NAMES[0]}")
    assert first.status_code == 200, first.text
    for name in NAMES:
        answer, handed = ask(lab, f"/v1/aliases/{name}")
        assert answer.status_code == 200, answer.text
        assert handed == 2, "who asks, then the read and its encoding"
        shown = lab.local("carol").catalog_show(name)
        assert answer.content == compact(shapes.published_json(shown))
        assert answer.headers["content-type"] == "application/json"
        assert answer.headers["cache-control"] == "no-store"


def test_a_page_of_list_hands_the_thread_pool_who_asks_and_the_read(lab: GatewayLab) -> None:
    ask(lab, "/v1/aliases?limit=2")
    answer, handed = ask(lab, "/v1/aliases?limit=2")
    assert answer.status_code == 200, answer.text
    assert handed == 2, "who asks, then the read and its encoding"
    page = lab.local("carol").catalog_page(ListQuery(limit=2))
    assert answer.content == compact(shapes.summary_page_json(page))
    assert answer.json()["next"] == NAMES[1]


def test_a_refusal_of_the_read_is_the_one_error_body(lab: GatewayLab) -> None:
    missing, _ = ask(lab, "/v1/aliases/no-such-alias")
    assert missing.status_code == 404
    assert set(missing.json()["error"]) == {"field", "rule", "exit_code"}
    bad_limit, _ = ask(lab, "/v1/aliases?limit=0")
    assert bad_limit.status_code == 400
    assert bad_limit.json()["error"]["field"] == "limit"
