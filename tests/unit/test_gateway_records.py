"""What a request through the gateway leaves in the records: the request and its plan (schema 5
only when it carries a requester), the job's comment, an alias's ownership (document schema 4),
a private source (schema 5), the order books, the request rate."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime

import pytest

from slurm_image.domain.access import Ownership
from slurm_image.domain.canonical import canonical_json
from slurm_image.domain.errors import InvalidRecord, InvalidRequest, PlanInvariantViolation
from slurm_image.domain.job import is_marker_of, submission_marker
from slurm_image.domain.limits import take
from slurm_image.domain.orders import Order, OrderBook, load_order_book
from slurm_image.domain.plan import Plan, RuntimeDigests, derive_plan, load_plan
from slurm_image.domain.profile import parse_profile
from slurm_image.domain.publication import AliasDocument, load_alias, load_source
from slurm_image.domain.request import Request, make_request
from slurm_image.domain.requester import Requester
from support import PROFILE, selection_for

DIGEST = "sha256:" + "d" * 64
SOURCE = f"registry.example.org/team/app:1@{DIGEST}"
ALICE = Requester(user="alice", uid=1001)
RUNTIME = RuntimeDigests(inspector_sha256="1" * 64, rc_sha256="2" * 64)


def plan_of(request: Request) -> Plan:
    site = parse_profile(copy.deepcopy(PROFILE))
    return derive_plan(
        request,
        site,
        selection_for(site),
        lifecycle_id="img-" + "a" * 32,
        created_at=datetime(2026, 12, 4, tzinfo=UTC),
        runtime=RUNTIME,
    )


def test_a_request_without_gateway_fields_keeps_its_plans_version() -> None:
    plain = plan_of(make_request("import_oci", name="a", role="client", source=SOURCE))
    assert plain.schema_version == 2
    assert "requester" not in plain.canonical_bytes().decode()
    assert plain.job_spec().comment == f"slurm-image:{plain.lifecycle_id}"


def test_a_request_for_a_requester_is_a_version_5_plan_and_names_them_in_the_comment() -> None:
    request = make_request(
        "import_oci", name="a", role="client", source=SOURCE, requester=ALICE, group="physics"
    )
    plan = plan_of(request)
    assert plan.schema_version == 5
    assert plan.job_spec().comment == f"slurm-image:{plan.lifecycle_id};requester=alice"
    assert load_plan(plan.canonical_bytes()).request.requester == ALICE
    older = json.loads(plan.canonical_bytes())
    older["schema_version"] = 4
    with pytest.raises(PlanInvariantViolation) as refused:
        load_plan(canonical_json(older))
    assert refused.value.field == "request.requester"


def test_the_submission_marker_reads_with_or_without_a_requester() -> None:
    assert is_marker_of(submission_marker("img-1"), "img-1")
    assert is_marker_of(submission_marker("img-1", "alice"), "img-1")
    assert not is_marker_of(submission_marker("img-12", "alice"), "img-1")
    assert not is_marker_of("slurm-image:img-1 for alice", "img-1")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"private": True}, "group"),
        ({"group": "not a group"}, "group"),
        ({"private": True, "group": "g", "operation": "inspect_sqsh"}, "private"),
    ],
)
def test_a_requests_sharing_follows_its_rules(changes: dict[str, object], field: str) -> None:
    operation = changes.pop("operation", "import_oci")
    source = SOURCE if operation == "import_oci" else "/tmp/image.sqsh"
    with pytest.raises(InvalidRequest) as refused:
        make_request(operation, name="a", role="client", source=source, **changes)  # type: ignore[arg-type]
    assert refused.value.field == field


def alias_entry() -> dict[str, object]:
    return {
        "schema_version": 3,
        "name": "a",
        "role": "client",
        "path": "/ws/images/artifacts/" + "f" * 64 + ".sqsh",
        "sqsh_sha256": "f" * 64,
        "size": 10,
        "identity": {"device": 1, "inode": 2},
        "operation": "import_oci",
        "source": SOURCE,
        "source_digest": DIGEST,
        "inspection_schema_version": 3,
        "inspector_version": "3.0.0",
        "facts": {},
        "lifecycle_id": "img-1",
        "published_at": "2026-12-04T00:00:00.000000Z",
        "chain": None,
        "architecture": "x86_64",
    }


def test_an_alias_with_an_owner_is_a_version_4_document_that_reads_back() -> None:
    plain = load_alias(
        json.dumps({"entries": [alias_entry()], "name": "a", "schema_version": 3}).encode()
    )
    assert plain.ownership == Ownership()
    owned = AliasDocument.of(
        *plain.entries, ownership=Ownership(owner=ALICE, group="g", private=True)
    )
    assert owned.schema_version == 4
    again = load_alias(owned.canonical_bytes())
    assert again.ownership == Ownership(owner=ALICE, group="g", private=True)
    assert AliasDocument.of(*plain.entries, ownership=Ownership()).schema_version == 3


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"schema_version": 3, "owner": {"user": "alice", "uid": 1001}}, "schema_version"),
        ({"schema_version": 4}, "schema_version"),
        ({"schema_version": 4, "private": True}, "private"),
        ({"schema_version": 4, "group": "no such name!"}, "group"),
    ],
)
def test_an_alias_documents_ownership_follows_its_version(
    changes: dict[str, object], field: str
) -> None:
    document = {"entries": [alias_entry()], "name": "a", "schema_version": 3} | changes
    with pytest.raises(InvalidRecord) as refused:
        load_alias(json.dumps(document).encode())
    assert field in refused.value.field


def source_record(**changes: object) -> bytes:
    record = {
        "schema_version": 3,
        "source_digest": DIGEST,
        "source": SOURCE,
        "sqsh_sha256": "f" * 64,
        "roles": {},
        "chain": {"pinned": DIGEST, "manifest": DIGEST, "config": "sha256:" + "c" * 64},
        "architecture": "x86_64",
    }
    return json.dumps(record | changes).encode()


def test_a_private_source_is_version_5_and_names_its_group() -> None:
    assert load_source(source_record(schema_version=5, private_group="g")).private_group == "g"
    with pytest.raises(InvalidRecord):
        load_source(source_record(schema_version=3, private_group="g"))
    with pytest.raises(InvalidRecord):
        load_source(source_record(schema_version=5))


def order(user: str | None, name: str, role: str = "client") -> Order:
    requester = Requester(user=user, uid=1000 + len(user)) if user else None
    request = make_request("import_oci", name=name, role=role, source=SOURCE, requester=requester)
    return Order(request=request, replace=False, ordered_at="2026-12-04T00:00:00.000000Z")


def test_an_order_book_reads_back_and_withdraws_a_requesters_orders() -> None:
    book = OrderBook(
        lifecycle_id="img-1",
        source_digest=DIGEST,
        architecture="x86_64",
        orders=(order("alice", "a"), order("bob", "b")),
    )
    assert load_order_book(book.canonical_bytes()) == book
    left = book.without(1003)  # bob's
    assert left is not None and [o.request.name for o in left.orders] == ["a"]
    assert book.without(9999) == book
    assert (
        OrderBook(
            lifecycle_id="img-1",
            source_digest=DIGEST,
            architecture="x86_64",
            orders=(order("bob", "b"),),
        ).without(1003)
        is None
    )


@pytest.mark.parametrize(
    ("changes", "rule"),
    [
        ({"orders": ()}, "1 to"),
        ({"architecture": None}, "joins"),
        ({"orders": (order("alice", "a"), order("bob", "b", "serving"))}, "one role"),
    ],
)
def test_an_order_book_keeps_its_rules(changes: dict[str, object], rule: str) -> None:
    fields = {
        "lifecycle_id": "img-1",
        "source_digest": DIGEST,
        "architecture": "x86_64",
        "orders": (order("alice", "a"), order("bob", "b")),
    } | changes
    with pytest.raises(ValueError, match=rule):
        OrderBook(**fields)  # type: ignore[arg-type]


def test_the_request_rate_is_a_token_bucket() -> None:
    bucket, wait = take(None, 0.0, 2)
    assert wait is None
    bucket, wait = take(bucket, 0.0, 2)
    assert wait is None
    refused, wait = take(bucket, 0.0, 2)
    assert wait == 30
    bucket, wait = take(refused, 30.0, 2)
    assert wait is None
