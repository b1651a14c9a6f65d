"""``list`` through the gateway (tests/gateway_lab.py): summaries a page at a time, filtered,
every query parameter bounded, the command line paging through to print what it prints
locally."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import slurm_image.composition.command_api as command_api
from cli_site import run_main as cli_run
from gateway_lab import SOURCE, SQSH, GatewayLab, gateway_lab
from publish_support import inspection
from slurm_image.domain.listing import LISTING_KEYS, ListQuery

ALIASES = 250


def name_of(index: int) -> str:
    return f"img-{index:03d}"


def owner_of(index: int) -> str:
    return "bob" if index % 5 == 0 else "alice"


def a_python_image_with_vllm() -> bytes:
    """The inspection of an image with as many packages as a real one (its record about 7 KB,
    as on a real store), vLLM among them."""
    facts = json.loads(inspection("client", SQSH))["facts"]
    facts["distributions"] = [
        *({"name": f"package-{index:03d}", "version": "1.0.0"} for index in range(100)),
        {"name": "pip", "version": "23.0.1"},
        {"name": "vllm", "version": "0.6.3"},
    ]
    return inspection("client", SQSH, facts=facts)


@pytest.fixture(scope="module")
def lab() -> Iterator[GatewayLab]:
    """A store of ``ALIASES`` aliases of one image: one job, the others answered from it."""
    with gateway_lab("requests_per_minute = 100000") as running:
        first = running.local(owner_of(0)).import_image(SOURCE, name=name_of(0), role="client")
        running.run_job(first.lifecycle_id, inspection_record=a_python_image_with_vllm())
        assert running.local().settle().published == [first.lifecycle_id]
        for index in range(1, ALIASES):
            outcome = running.local(owner_of(index)).import_image(
                SOURCE, name=name_of(index), role="client"
            )
            assert outcome.from_store
        yield running


def get(lab: GatewayLab, path: str, **params: Any) -> httpx.Response:
    return httpx.get(
        f"{lab.url}{path}",
        params=params,
        headers={"Authorization": f"Munge {lab.credential('carol')}"},
        timeout=60,
    )


def test_pages_of_summaries_hold_every_alias_once(lab: GatewayLab) -> None:
    names: list[str] = []
    pages = 0
    after: str | None = None
    while True:
        answer = get(lab, "/v1/aliases", limit=100, **({"after": after} if after else {}))
        assert answer.status_code == 200, answer.text
        page = answer.json()
        assert set(page) == {"images", "next"}
        assert all(set(image) == set(LISTING_KEYS) for image in page["images"])
        names += [image["name"] for image in page["images"]]
        pages += 1
        after = page["next"]
        if after is None:
            break
        assert after == names[-1]
    assert pages == 3
    assert names == [name_of(index) for index in range(ALIASES)], "each once, in name order"


def test_a_summary_is_a_small_part_of_the_full_record(lab: GatewayLab) -> None:
    (summary,) = get(lab, "/v1/aliases", limit=1).json()["images"]
    full = get(lab, f"/v1/aliases/{summary['name']}").json()
    assert summary["sqsh_sha256"] == full["record"]["sqsh_sha256"]
    assert (summary["owner"], summary["architectures"]) == ("bob", ["x86_64"])
    assert (summary["python_version"], summary["vllm_version"]) == ("3.11.2", "0.6.3")
    assert "facts" not in summary and "chain" not in summary
    assert len(json.dumps(full)) > 6000
    assert len(json.dumps(summary)) * 5 < len(json.dumps(full))


def test_filters_by_owner_prefix_and_role(lab: GatewayLab) -> None:
    bobs = get(lab, "/v1/aliases", owner="bob", limit=1000).json()
    assert [i["name"] for i in bobs["images"]] == [name_of(i) for i in range(0, ALIASES, 5)]
    assert bobs["next"] is None
    prefixed = get(lab, "/v1/aliases", prefix="img-1", limit=60).json()
    assert [i["name"] for i in prefixed["images"]] == [name_of(i) for i in range(100, 160)]
    assert prefixed["next"] == name_of(159)
    assert get(lab, "/v1/aliases", role="serving").json() == {"images": [], "next": None}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("limit", "0"),
        ("limit", "1001"),
        ("limit", "many"),
        ("after", "../aliases"),
        ("role", "admin"),
        ("owner", "bad name"),
        ("prefix", "-img"),
        ("prefix", "x" * 200),
    ],
)
def test_a_bad_query_parameter_is_one_400_naming_it(
    lab: GatewayLab, field: str, value: str
) -> None:
    answer = get(lab, "/v1/aliases", **{field: value})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["field"], error["exit_code"]) == (field, 2)


def test_the_client_pages_through_to_what_the_local_verbs_list(lab: GatewayLab) -> None:
    query = ListQuery(limit=40, owner="alice")
    remote = lab.client("carol").catalog_summaries(query)
    assert remote == lab.local("carol").catalog_summaries(query)
    assert [s["name"] for s in remote] == [
        name_of(i) for i in range(ALIASES) if owner_of(i) == "alice"
    ]


def test_list_prints_the_same_summaries_through_the_gateway_and_locally(
    lab: GatewayLab, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(command_api, "remote", lambda url: lab.client("carol"))
    code, through, _ = cli_run(capsys, "--gateway", lab.url, "--json", "list")
    assert code == 0
    code, local, _ = cli_run(capsys, "--profile", str(lab.profile), "--json", "list")
    assert code == 0
    images = json.loads(through)["images"]
    assert json.loads(local)["images"] == images
    assert [image["name"] for image in images] == [name_of(i) for i in range(ALIASES)]
