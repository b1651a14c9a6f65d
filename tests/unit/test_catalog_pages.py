"""The catalog's pages without a server (gateway/pages/): the rows ``views`` makes of
published records, the history and the queue; every template autoescaped and every script
putting text in as text; the files ``export`` writes and the ones it removes."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from slurm_image.domain.history import HistoryEvent
from slurm_image.domain.published import Owned, PublishedAlias
from slurm_image.gateway.pages import export, render, views

PATH = "/store/images/artifacts/" + "a" * 64 + ".sqsh"
PAGES = Path(render.__file__).parent
MARKUP = "/usr/bin/pip</td><script>alert(1)</script><img src=x onerror=alert(2)>"


def record(name: str = "torch", **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": name,
        "architecture": "x86_64",
        "role": "client",
        "path": PATH,
        "sqsh_sha256": "a" * 64,
        "source": f"registry.example.org/ml/torch:2.4@sha256:{'1' * 64}",
        "source_digest": "sha256:" + "1" * 64,
        "published_at": "2026-01-02T03:04:05.123456Z",
        "resolved_from": None,
        "signed_by": None,
        "facts": {
            "python": {"implementation": "cpython", "version": "3.11.2", "abi": "cp311"},
            "distributions": [
                {"name": "pip", "version": "23.0.1"},
                {"name": "vllm", "version": "0.6.3"},
            ],
            "installer": {"name": "pip", "version": "23.0.1", "path": "/usr/bin/pip"},
        },
        "inspector_version": "3.0.0",
        "lifecycle_id": "img-" + "1" * 32,
        "size": 4_100_000,
        "chain": None,
    }
    return base | changes


def published(name: str = "torch", owned: Owned = Owned(), **changes: Any) -> PublishedAlias:
    entry = record(name, **changes)
    return PublishedAlias(entry, (entry["architecture"],), owned)


def event(kind: str, at: datetime, **fields: Any) -> HistoryEvent:
    values: dict[str, Any] = {"user": "alice", "uid": 1001, "host": "login1", "alias": "torch"}
    return HistoryEvent(event=kind, time=at, **(values | fields))  # type: ignore[arg-type]


def test_a_row_names_the_registry_the_tag_resolved_from_and_the_facts_that_matter() -> None:
    resolved = {
        "tag": "registry.example.org/ml/torch:2.4",
        "digest": "sha256:" + "1" * 64,
        "resolved_at": "2026-01-02T03:04:05.000000Z",
    }
    signer = {
        "digest": "sha256:" + "1" * 64,
        "format": "sigstore-bundle",
        "key_fingerprint": "f" * 64,
        "signed_digest": "sha256:" + "1" * 64,
    }
    (row,) = views.catalog_rows(
        [published(resolved_from=resolved, signed_by=signer, source=record()["source"])],
        "x86_64",
    )
    assert row.source.where == "registry.example.org/ml/torch"
    assert row.source.tag == "2.4"
    assert row.signer == "f" * 64
    assert (row.facts.python, row.facts.pip, row.facts.vllm) == ("3.11.2", "23.0.1", "0.6.3")
    assert (row.size_text, row.published_text) == ("4.1 MB", "2026-01-02 03:04:05Z")
    for word in ("torch", "registry.example.org/ml/torch:2.4", "vllm 0.6.3", "python 3.11.2"):
        assert word in row.search


def test_a_row_of_an_inspected_sqsh_an_unsigned_and_a_docker_hub_image() -> None:
    (inspected,) = views.catalog_rows([published(source="/home/u/app.sqsh")], None)
    assert (inspected.source.where, inspected.source.tag) == ("/home/u/app.sqsh", None)
    assert inspected.signer == "unsigned"
    (hub,) = views.catalog_rows([published(source=f"ubuntu:22.04@sha256:{'2' * 64}")], None)
    assert (hub.source.where, hub.source.tag) == ("docker.io/ubuntu", "22.04")


def test_one_row_per_alias_with_the_entry_of_this_machine() -> None:
    arm = record("torch", architecture="aarch64", size=1)
    x86 = record("torch", architecture="x86_64", size=2)
    both = ("aarch64", "x86_64")
    entries = [
        PublishedAlias(arm, both),
        PublishedAlias(x86, both),
        published("a-first"),
    ]
    rows = views.catalog_rows(entries, "aarch64")
    assert [(row.name, row.size) for row in rows] == [("a-first", 4_100_000), ("torch", 1)]
    assert rows[1].architectures == ["aarch64", "x86_64"]
    assert views.catalog_rows(entries, "ppc64le")[1].size == 1, "else the alias's first entry"


def test_the_srun_line_quotes_the_path_as_a_shell_reads_it() -> None:
    assert views.srun_line(PATH) == f"srun --container-image={PATH} --pty bash"
    assert views.srun_line("/a b/x.sqsh") == "srun --container-image='/a b/x.sqsh' --pty bash"


def test_the_alias_page_offers_the_srun_line_of_this_machines_entry_only() -> None:
    entries = [published()]
    page = views.alias_page("torch", entries, [], "x86_64")
    stable = "/store/images/by-name/x86_64/torch.sqsh"
    assert page.here is not None and page.here.srun.endswith(f"={stable} --pty bash")
    assert views.alias_page("torch", entries, [], "aarch64").here is None
    before_architectures = [PublishedAlias(record(architecture=None), (None,))]
    old = views.alias_page("torch", before_architectures, [], "aarch64")
    assert old.architectures == ["unknown"]
    assert old.here is not None, "an alias from before architectures runs on any machine"


def test_the_srun_line_runs_by_name_a_private_alias_through_its_groups_directory() -> None:
    private = [PublishedAlias(record(), ("x86_64",), Owned(group="physics", private=True))]
    page = views.alias_page("torch", private, [], "x86_64")
    stable = "/store/images/by-name/groups/physics/x86_64/torch.sqsh"
    assert page.here is not None and page.here.srun == f"srun --container-image={stable} --pty bash"
    elsewhere = [PublishedAlias(record(path="/site/images/torch.sqsh"), ("x86_64",))]
    page = views.alias_page("torch", elsewhere, [], "x86_64")
    assert page.here is not None, "an artifact no store holds runs by its own path"
    assert page.here.srun == "srun --container-image=/site/images/torch.sqsh --pty bash"


def test_the_history_and_the_requests_rows() -> None:
    now = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)
    events = [
        event("published", now - timedelta(hours=1), job_seconds=125.0, architecture="x86_64"),
        event("job_failed", now - timedelta(minutes=5), exit_code=79),
        event("gc_attempt", now - timedelta(minutes=1)),
        event("cancelled", now - timedelta(hours=25)),
    ]
    queue = [
        {
            "lifecycle_id": "img-" + "2" * 32,
            "source": "registry.example.org/ml/live:1@sha256:" + "5" * 64,
            "architecture": "x86_64",
            "state": "RUNNING",
            "phase": "download",
            "progress": {
                "layers_done": 1,
                "layers_total": 4,
                "bytes_done": 3_000_000,
                "bytes_total": 12_000_000,
            },
            "orders": [
                {"alias": "live", "requester": "dave", "ordered_at": "2026-01-02T11:57:55Z"},
                {"alias": "live2", "requester": "erin", "ordered_at": "2026-01-02T11:58:00Z"},
            ],
        }
    ]
    view = views.requests_view(queue, events, now)
    (flight,) = view.in_flight
    assert (flight.aliases, flight.requesters) == ("live, live2", "dave, erin")
    assert flight.progress == "1/4 layers, 3.0 MB of 12.0 MB"
    assert flight.elapsed == "2m 05s"
    assert [(row.event, row.elapsed) for row in view.ended] == [
        ("job_failed", "-"),
        ("published", "2m 05s"),
    ], "newest first, ended events of the last day only"
    assert view.as_json()["in_flight"][0]["phase"] == "download"
    assert [row.event for row in views.history_rows(events)] == [
        "gc_attempt",
        "job_failed",
        "published",
        "cancelled",
    ], "the alias page's history, newest first"


@pytest.mark.parametrize(
    ("seconds", "text"), [(None, "-"), (0, "0s"), (59.9, "59s"), (61, "1m 01s"), (3720, "1h 02m")]
)
def test_durations(seconds: float | None, text: str) -> None:
    assert views.duration(seconds) == text


def test_every_template_is_autoescaped_and_marks_no_data_safe() -> None:
    names = render.template_names()
    assert {"base.html", "catalog.html", "alias.html", "requests.html", "error.html"} <= set(names)
    for name in names:
        text = (PAGES / render.TEMPLATES / name).read_text()
        assert not re.search(r"\|\s*safe|autoescape\s+false|Markup", text), name


def test_the_scripts_put_text_in_as_text_and_nothing_runs_inline() -> None:
    for name in ("catalog.js", "requests.js"):
        text = render.ASSETS[name].decode()
        assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(", text)
    for name in render.template_names():
        text = (PAGES / render.TEMPLATES / name).read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)|<style|\son\w+=|style=", text), name
    assert "'unsafe-inline'" not in render.CONTENT_SECURITY_POLICY
    assert render.CONTENT_SECURITY_POLICY.startswith("default-src 'self';")


def test_markup_in_a_fact_renders_as_text_in_every_page() -> None:
    hostile = record(
        "evil",
        facts=record()["facts"] | {"installer": {"name": "pip", "version": "1", "path": MARKUP}},
    )
    entry = PublishedAlias(hostile, ("x86_64",), Owned(user="x<b>y", group="g&h"))
    site = render.Site(static=True)
    pages = [
        render.render(
            "catalog.html",
            site=site,
            root="",
            rows=views.catalog_rows([entry], None),
            machine=None,
        ),
        render.render(
            "alias.html",
            site=site,
            root="../",
            page=views.alias_page("evil", [entry], [], "x86_64"),
        ),
    ]
    for html in pages:
        assert "<script>alert" not in html and "<img" not in html and "<b>" not in html
    assert "&lt;/td&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x" in pages[1]
    assert "x&lt;b&gt;y" in pages[0]


def test_the_export_writes_relative_pages_and_removes_only_pages_of_aliases_gone(
    tmp_path: Path,
) -> None:
    class Reading:
        def catalog_list(self) -> list[PublishedAlias]:
            return [published("torch"), published("serve")]

        def history(self, name: str | None = None, *, since: datetime | None = None) -> Any:
            from slurm_image.domain.history import HistoryRead

            return HistoryRead(events=())

    aliases = tmp_path / "aliases"
    aliases.mkdir()
    (aliases / "gone.html").write_text("old")
    (aliases / "notes.txt").write_text("the site's own")
    (aliases / ".hidden.html").write_text("not an alias page")
    (tmp_path / "elsewhere.html").write_text("kept")
    (aliases / "link.html").symlink_to(tmp_path / "elsewhere.html")

    done = export.export(Reading(), str(tmp_path), "x86_64")

    assert done.pages == ["index.html", "aliases/serve.html", "aliases/torch.html"]
    assert done.removed == ["aliases/gone.html"]
    assert sorted(p.name for p in aliases.iterdir()) == [
        ".hidden.html",
        "link.html",
        "notes.txt",
        "serve.html",
        "torch.html",
    ]
    assert (tmp_path / "elsewhere.html").read_text() == "kept"
    index = (tmp_path / "index.html").read_text()
    assert 'href="aliases/torch.html"' in index and 'href="static/catalog.css"' in index
    assert '<meta http-equiv="Content-Security-Policy"' in index
    page = (aliases / "torch.html").read_text()
    assert 'href="../index.html"' in page and 'src="../static/catalog.js"' in page
    assert "Requests" not in page, "no live page without a gateway"
    assert sorted(p.name for p in (tmp_path / "static").iterdir()) == sorted(render.ASSETS)
