"""What the command line makes of a gateway's answer that is not what the API says
(adapters/gateway_client/remote.py): a refusal naming the gateway, exit 3, never an internal
error."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from slurm_image.adapters.gateway_client.exchange import Gateway
from slurm_image.adapters.gateway_client.remote import RemoteLifecycles
from slurm_image.wire.errors import exit_code_for
from slurm_image.wire.exit_codes import EXIT_SCHEDULER
from slurm_image.wire.remote_error import RemoteError


def answering(body: Any, status: int = 200) -> RemoteLifecycles:
    transport = httpx.MockTransport(lambda request: httpx.Response(status, json=body))
    client = httpx.Client(transport=transport, base_url="http://gateway")
    return RemoteLifecycles(Gateway("unix:/run/none.sock"), client=client)


@pytest.mark.parametrize(
    ("body", "call", "args"),
    [
        ({"images": "not a list"}, "catalog_summaries", ()),
        ({"images": [{"record": "not a summary"}]}, "catalog_summaries", ()),
        ({"images": [], "next": 7}, "catalog_summaries", ()),
        ({"images": [{"name": "a"}], "next": None}, "catalog_summaries", ()),
        ({"images": [], "next": "a"}, "catalog_summaries", ()),
        ({"lifecycles": [{"lifecycle_id": "img-1", "state": "DANCING"}]}, "status", (["img-1"],)),
        ({}, "status", (["img-1"],)),
        ({"name": 7}, "unregister", ("a",)),
        ({"queue": ["not an object"]}, "queue", ()),
        ({"events": [{"event": "nonsense"}]}, "history", ()),
        (["not", "an", "object"], "catalog_show", ("a",)),
    ],
)
def test_an_answer_the_api_does_not_describe_is_the_gateways_fault(
    body: Any, call: str, args: tuple[Any, ...]
) -> None:
    with pytest.raises(RemoteError) as raised:
        getattr(answering(body), call)(*args)
    assert exit_code_for(raised.value) == EXIT_SCHEDULER
    assert raised.value.field == "gateway"
    assert "does not say" in raised.value.rule


def test_a_refusal_keeps_the_gateways_field_rule_and_exit_code() -> None:
    error = {"error": {"field": "name", "rule": "is for alice", "exit_code": 11}}
    with pytest.raises(RemoteError) as raised:
        answering(error, status=403).unregister("a")
    assert (raised.value.field, raised.value.rule, exit_code_for(raised.value)) == (
        "name",
        "is for alice",
        11,
    )


def test_an_error_body_without_the_products_shape_is_exit_3() -> None:
    with pytest.raises(RemoteError) as raised:
        answering({"detail": "Not Found"}, status=404).catalog_summaries()
    assert exit_code_for(raised.value) == EXIT_SCHEDULER
    assert "HTTP 404" in raised.value.rule
