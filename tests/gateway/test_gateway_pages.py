"""The catalog's pages over real HTTP (docs/gateway.md, "The catalog page"; tests/catalog_site.py):
who may read them, what anyone sees and what stays private, the headers every answer carries,
and that no page changes anything. What a browser makes of them: tests/browser/."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from catalog_site import (
    INJECTED_PIP,
    LIVE,
    REGISTRY,
    SECRET,
    CatalogSite,
    catalog_site,
    publish,
    sqsh,
    write_progress,
)
from gateway_lab import PRIVATE_GROUP, GatewayLab, gateway_lab
from slurm_image.application.catalog_changes import changing
from slurm_image.domain.credentials import RegistryCredentials

PAGES = ("/", "/aliases/torch", "/requests", "/requests.json")


@pytest.fixture(scope="module")
def site() -> Iterator[CatalogSite]:
    with catalog_site() as running:
        yield running


def get(lab: GatewayLab, path: str, user: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Munge {lab.credential(user)}"} if user else {}
    return httpx.get(lab.url + path, headers=headers, timeout=30)


def names_on(page: httpx.Response) -> list[str]:
    """The aliases the catalog page lists, in its order."""
    return [
        line.split('href="aliases/', 1)[1].split('"', 1)[0]
        for line in page.text.splitlines()
        if 'href="aliases/' in line
    ]


def test_without_public_catalog_a_page_needs_an_identity() -> None:
    with gateway_lab() as lab:
        publish(
            lab, "alice", "torch", f"{REGISTRY}/ml/torch:1@sha256:{'6' * 64}", image=sqsh("t", 99)
        )
        for path in PAGES:
            answer = get(lab, path)
            assert answer.status_code == 401, path
        assert "public_catalog" in get(lab, "/").text
        assert get(lab, "/requests.json").json()["error"]["field"] == "authorization"
        assert names_on(get(lab, "/", "bob")) == ["torch"]
        assert get(lab, "/aliases/torch", "bob").status_code == 200
        forged = httpx.get(lab.url + "/", headers={"Authorization": "Munge MUNGE:forged:"})
        assert forged.status_code == 401, "a credential that is there must be good"


def test_anyone_reads_the_public_aliases_and_nothing_private(site: CatalogSite) -> None:
    lab = site.lab
    assert names_on(get(lab, "/")) == ["hostile", "torch", "vllm-serve"]
    hidden = get(lab, "/aliases/secret")
    assert hidden.status_code == 404 and "secret" in hidden.text
    assert hidden.headers["content-type"].startswith("text/html")
    ended = get(lab, "/requests.json").json()["ended"]
    assert {row["alias"] for row in ended} == {
        "torch/x86_64",
        "vllm-serve/x86_64",
        "hostile/x86_64",
    }, "the private alias's events are not anyone's"
    assert names_on(get(lab, "/", "alice")) == ["hostile", "secret", "torch", "vllm-serve"]
    assert get(lab, "/aliases/secret", "alice").status_code == 200
    assert names_on(get(lab, "/", "bob")) == ["hostile", "torch", "vllm-serve"]
    assert get(lab, "/aliases/secret", "bob").status_code == 404


def test_a_private_lifecycle_in_flight_is_its_groups_alone() -> None:
    with gateway_lab("public_catalog = true") as lab:
        login = RegistryCredentials(host=REGISTRY, login="alice", password="s3cret-pw")
        private = lab.client("alice").import_image(
            SECRET, name="secret", role="client", group=PRIVATE_GROUP, credentials=login
        )
        public = lab.client("dave").import_image(LIVE, name="live", role="client")
        lab.scheduler.start(lab.job_of(public.lifecycle_id))
        write_progress(lab, public.lifecycle_id, "download", bytes_done=1_000, bytes_total=4_000)

        def flying(user: str | None) -> dict[str, dict[str, Any]]:
            rows = get(lab, "/requests.json", user).json()["in_flight"]
            return {row["lifecycle_id"]: row for row in rows}

        assert set(flying(None)) == {public.lifecycle_id}
        assert set(flying("bob")) == {public.lifecycle_id}
        assert set(flying("alice")) == {public.lifecycle_id, private.lifecycle_id}
        live = flying(None)[public.lifecycle_id]
        assert (live["phase"], live["progress"], live["requesters"]) == (
            "download",
            "1.0 kB of 4.0 kB",
            "dave",
        )
        (queued,) = [
            q for q in lab.client("dave").queue() if q["lifecycle_id"] == public.lifecycle_id
        ]
        assert queued["progress"] == {"bytes_done": 1_000, "bytes_total": 4_000}


def test_every_answer_carries_the_policy_and_nosniff(site: CatalogSite) -> None:
    for path in (*PAGES, "/static/catalog.js", "/static/catalog.css", "/aliases/nope", "/healthz"):
        headers = get(site.lab, path).headers
        policy = headers["content-security-policy"]
        assert policy.startswith("default-src 'self';"), path
        assert "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
        assert headers["x-content-type-options"] == "nosniff", path
    assert get(site.lab, "/v1/aliases", "bob").headers["x-content-type-options"] == "nosniff"
    script = get(site.lab, "/static/catalog.js")
    assert script.headers["content-type"].startswith("text/javascript")
    assert get(site.lab, "/static/nothing.js").status_code == 404
    assert get(site.lab, "/static/..%2Fviews.py").status_code == 404


def test_the_pages_change_nothing_and_answer_only_get(site: CatalogSite) -> None:
    lab = site.lab
    store = Path(lab.root)
    before = sorted((p, p.stat().st_mtime_ns) for p in store.rglob("*") if p.is_file())
    for path in PAGES:
        assert get(lab, path).status_code == 200
        for method in ("POST", "PUT", "DELETE"):
            assert httpx.request(method, lab.url + path).status_code == 405, (method, path)
    after = sorted((p, p.stat().st_mtime_ns) for p in store.rglob("*") if p.is_file())
    assert after == before
    pages = [
        route
        for route in lab.app.routes
        if not getattr(route, "path", "/v1").startswith(("/v1", "/openapi"))
    ]
    assert pages
    for route in pages:
        assert set(getattr(route, "methods", {"GET"})) <= {"GET", "HEAD"}, route


def test_markup_from_an_image_is_escaped_in_the_served_html(site: CatalogSite) -> None:
    html = get(site.lab, "/aliases/hostile").text
    assert INJECTED_PIP not in html
    assert "/usr/bin/pip&lt;img src=x onerror=window.__pwned=1;alert(1)&gt;" in html
    assert "<script>window" not in html and "<svg" not in html


def test_the_signer_is_shown_by_its_key_fingerprint(site: CatalogSite) -> None:
    lab = site.lab
    fingerprint = "9f" * 32
    alias = Path(lab.layout.alias("vllm-serve"))
    document = json.loads(alias.read_bytes())
    digest = document["entries"][0]["source_digest"]
    document["entries"][0]["signed_by"] = {
        "digest": digest,
        "format": "sigstore-bundle",
        "key_fingerprint": fingerprint,
        "signed_digest": digest,
    }
    mode = alias.stat().st_mode
    with changing(lab.lifecycles.container.store(), lab.layout):  # counted, as a writer does
        alias.write_text(json.dumps(document))  # the record as a signed import leaves it
        os.chmod(alias, mode)
    assert f'title="{fingerprint}"' in get(lab, "/").text
    page = get(lab, "/aliases/vllm-serve").text
    assert f"key <code>{fingerprint}</code> (sigstore-bundle)" in page


def test_readers_with_no_identity_are_held_to_the_request_rate() -> None:
    with gateway_lab("public_catalog = true\nrequests_per_minute = 2") as lab:
        assert [get(lab, "/").status_code for _ in range(2)] == [200, 200]
        busy = get(lab, "/")
        assert busy.status_code == 429 and "no identity" in busy.text
        assert get(lab, "/", "alice").status_code == 200, "each reader has a rate of their own"
