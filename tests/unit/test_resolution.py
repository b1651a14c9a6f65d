"""The tag a pin was resolved from, from the request to the published entry: the request's pin
must be the tag's, the plan records it (schema version 3, and only then), the alias entry keeps
it (schema version 4, and only then), ``show`` and ``list`` print it; every other plan and
record keeps the bytes of its older version."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from publish_support import SOURCE_DIGEST, PublishLab, chain_json
from slurm_image.application.catalog import Catalog
from slurm_image.application.catalog_reader import CatalogReader
from slurm_image.domain.canonical import canonical_json
from slurm_image.domain.errors import DomainError, InvalidRequest, PlanInvariantViolation
from slurm_image.domain.plan import load_plan
from slurm_image.domain.publication import load_alias
from slurm_image.domain.published import read_published
from slurm_image.domain.request import check_fields, make_request
from slurm_image.domain.resolution import ResolvedFrom
from support import make_plan

TAG = "registry.example.org/team/app:1"
PIN = f"sha256:{SOURCE_DIGEST}"
WHEN = "2026-01-02T03:04:05.000006Z"
RESOLVED = ResolvedFrom(tag=TAG, digest=PIN, resolved_at=WHEN)
A, B = (f"img-{n:032x}" for n in range(1, 3))


def test_a_resolution_pins_its_tag_by_its_digest() -> None:
    assert RESOLVED.pinned == f"{TAG}@{PIN}"
    assert RESOLVED.as_dict() == {"tag": TAG, "digest": PIN, "resolved_at": WHEN}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"tag": "registry.example.org/team/app"}, "resolved_from.tag"),
        ({"tag": f"{TAG}@{PIN}"}, "resolved_from.tag"),
        ({"digest": "sha256:" + "A" * 64}, "resolved_from.digest"),
        ({"resolved_at": "2026-01-02T04:04:05.000006+01:00"}, "resolved_from.resolved_at"),
        ({"resolved_at": "yesterday"}, "resolved_from.resolved_at"),
    ],
)
def test_a_resolution_that_breaks_a_rule_is_refused_naming_its_field(
    change: dict[str, str], field: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        ResolvedFrom.model_validate({**RESOLVED.model_dump(), **change})
    cause = caught.value.errors()[0]["ctx"]["error"]
    assert isinstance(cause, DomainError)
    assert cause.field == field


def test_an_import_request_must_be_the_pin_of_its_tag() -> None:
    request = make_request(
        "import_oci", name="app", role="client", source=RESOLVED.pinned, resolved_from=RESOLVED
    )
    assert request.resolved_from == RESOLVED
    other = f"registry.example.org/team/app:2@{PIN}"
    with pytest.raises(InvalidRequest) as caught:
        make_request("import_oci", name="app", role="client", source=other, resolved_from=RESOLVED)
    assert caught.value.field == "source"
    assert RESOLVED.pinned in caught.value.rule


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": "-bad", "role": "client"}, "name"),
        ({"name": "app", "role": "admin"}, "role"),
        ({"name": "app", "role": "client", "architecture": "arm64"}, "arch"),
    ],
)
def test_the_fields_of_a_request_are_checked_before_a_tag_is_resolved(
    fields: dict[str, Any], field: str
) -> None:
    with pytest.raises(DomainError) as caught:
        check_fields(**fields)
    assert caught.value.field == field


def test_a_plan_with_a_resolution_is_schema_version_3_and_reads_back() -> None:
    plan = make_plan(source=RESOLVED.pinned, resolved_from=RESOLVED)
    assert plan.schema_version == 3
    assert plan.request.resolved_from == RESOLVED
    assert load_plan(plan.canonical_bytes()) == plan
    assert json.loads(plan.canonical_bytes())["request"]["resolved_from"] == RESOLVED.as_dict()


def test_a_plan_without_one_keeps_the_bytes_of_version_2() -> None:
    plan = make_plan(source=RESOLVED.pinned)
    assert plan.schema_version == 2
    assert b"resolved_from" not in plan.canonical_bytes()


def test_an_older_plan_that_claims_a_resolution_is_refused() -> None:
    data = json.loads(make_plan(source=RESOLVED.pinned, resolved_from=RESOLVED).canonical_bytes())
    data["schema_version"] = 2
    with pytest.raises(PlanInvariantViolation) as caught:
        load_plan(canonical_json(data))
    assert caught.value.field == "request.resolved_from"


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> PublishLab:
    return PublishLab(workspace_harness, profile_for, runtime_files)


def test_a_published_import_keeps_its_tag_and_show_and_list_print_it(lab: PublishLab) -> None:
    lab.finished(A, source=RESOLVED.pinned, resolved_from=RESOLVED, chain=chain_json(PIN))
    record = lab.publish(A).record
    assert (record.schema_version, record.resolved_from) == (6, RESOLVED)  # with its job
    stored = lab.alias_entry("app")
    assert stored.resolved_from == RESOLVED
    assert CatalogReader(lab.store).show("app").details()["resolved_from"] == RESOLVED.as_dict()
    assert CatalogReader(lab.store).list()[0].summary()["resolved_from"] == RESOLVED.as_dict()
    assert Catalog(lab.store).verify("app").resolved_from == RESOLVED


def test_an_import_given_pinned_is_published_as_before_with_no_tag(lab: PublishLab) -> None:
    lab.finished(A, source=RESOLVED.pinned)
    record = lab.publish(A).record
    assert (record.schema_version, record.resolved_from) == (6, None)  # with its job
    entry = json.loads(lab.harness.read(lab.layout.alias("app")))["entries"][0]
    assert "resolved_from" not in entry
    assert CatalogReader(lab.store).show("app").details()["resolved_from"] is None


def test_an_import_answered_from_the_store_keeps_the_tag_it_was_asked_by(
    lab: PublishLab,
) -> None:
    lab.finished(A, source=RESOLVED.pinned, arch="x86_64")
    lab.publish(A)
    publisher = lab.publisher()
    source = publisher.stored_source(PIN, "x86_64")
    assert source is not None
    request = make_request(
        "import_oci",
        name="tagged",
        role="client",
        source=RESOLVED.pinned,
        architecture="x86_64",
        resolved_from=RESOLVED,
    )
    record = publisher.bind_stored(request, source).record
    assert record.resolved_from == RESOLVED
    assert lab.alias_entry("tagged").resolved_from == RESOLVED


def test_an_entry_claims_a_tag_exactly_in_schema_version_4(lab: PublishLab) -> None:
    lab.finished(A, source=RESOLVED.pinned, resolved_from=RESOLVED)
    lab.publish(A)
    document = json.loads(lab.harness.read(lab.layout.alias("app")))
    entry = {key: value for key, value in document["entries"][0].items() if key != "job"}
    assert load_alias(
        json.dumps({**document, "entries": [{**entry, "schema_version": 4}]}).encode()
    )
    for change in ({"schema_version": 3}, {"resolved_from": None, "schema_version": 4}):
        broken = {**document, "entries": [{**entry, **change}]}
        with pytest.raises(DomainError) as caught:
            load_alias(json.dumps(broken).encode())
        assert caught.value.field.endswith("resolved_from"), caught.value.field


@pytest.mark.parametrize("value", ["tag", ["a"], {"tag": TAG}, {**RESOLVED.as_dict(), "x": "1"}])
def test_the_launchers_read_refuses_a_malformed_tag_record(lab: PublishLab, value: Any) -> None:
    lab.finished(A, source=RESOLVED.pinned, resolved_from=RESOLVED)
    lab.publish(A)
    document = json.loads(lab.harness.read(lab.layout.alias("app")))
    document["entries"][0]["resolved_from"] = value
    with pytest.raises(DomainError) as caught:
        read_published(json.dumps(document).encode(), "app")
    assert caught.value.field == "alias.entries.0.resolved_from"
