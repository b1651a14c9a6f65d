"""The plan: derivation, canonical bytes, and every invariant refusing a mutated plan."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_image.domain.canonical import canonical_json, sha256_hex
from slurm_image.domain.errors import PlanInvariantViolation
from slurm_image.domain.plan import PLAN_MAX_BYTES, derive_plan, load_plan
from slurm_image.domain.profile import parse_profile
from support import (
    CREATED_AT,
    DIGEST,
    FULL_PROFILE,
    LIFECYCLE_ID,
    OTHER_HEX,
    PYTORCH,
    SQSH,
    make_plan,
)

JOB_DIR = f"/lustre/site/images/images/.tmp/jobs/{LIFECYCLE_ID}"


def test_import_plan_holds_the_source_digest_uri_and_attempt_local_paths() -> None:
    plan = make_plan()
    assert plan.schema_version == 2
    assert plan.operation == "import_oci"
    assert plan.source_digest == DIGEST
    assert plan.enroot_uri == f"docker://nvcr.io#nvidia/pytorch:24.05-py3@{DIGEST}"
    assert plan.paths.job_dir == JOB_DIR
    assert plan.paths.candidate == f"{JOB_DIR}/candidate.sqsh"
    assert plan.paths.partial == f"{JOB_DIR}/candidate.sqsh.partial"
    assert plan.paths.sqsh == plan.paths.candidate
    assert plan.paths.result == f"{JOB_DIR}/output/inspection.json"
    assert plan.created_at == "2025-01-02T03:04:05.678901Z"
    assert plan.marker == f"slurm-image:{LIFECYCLE_ID}"


def test_inspect_plan_has_no_source_digest_uri_or_candidate() -> None:
    plan = make_plan("inspect_sqsh", source=SQSH, role="serving")
    assert plan.operation == "inspect_sqsh"
    assert plan.source_digest is None and plan.enroot_uri is None
    assert plan.paths.candidate is None and plan.paths.partial is None
    assert plan.paths.sqsh == SQSH


@pytest.mark.parametrize(
    "plan_args",
    [
        {},
        {"operation": "inspect_sqsh", "source": SQSH, "role": "serving"},
        {"profile": FULL_PROFILE},
        {"operation": "inspect_sqsh", "source": "/données/é.sqsh", "profile": FULL_PROFILE},
    ],
)
def test_plan_round_trips_through_canonical_bytes(plan_args: dict[str, Any]) -> None:
    plan = make_plan(**plan_args)
    data = plan.canonical_bytes()
    assert load_plan(data) == plan
    assert data.endswith(b"}\n")
    assert data == canonical_json(json.loads(data))
    assert plan.sha256() == sha256_hex(data)


def test_canonical_bytes_are_sorted_utf8_with_a_trailing_newline() -> None:
    data = make_plan("inspect_sqsh", source="/données/é.sqsh").canonical_bytes()
    assert "/données/é.sqsh".encode() in data
    keys = list(json.loads(data))
    assert keys == sorted(keys)


@given(
    st.sampled_from([PYTORCH, f"ubuntu@{DIGEST}", f"localhost:5000/a/b:c@{DIGEST}"]),
    st.sampled_from(["client", "serving"]),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,40}", fullmatch=True),
    st.datetimes(
        min_value=datetime(2000, 1, 1),
        max_value=datetime(2100, 1, 1),
        timezones=st.just(timezone(timedelta(hours=5))),
    ),
)
def test_plan_round_trip_property(
    source: str, role: str, lifecycle_id: str, moment: datetime
) -> None:
    plan = make_plan(source=source, role=role, lifecycle_id=lifecycle_id)
    plan = derive_plan(
        plan.request,
        plan.profile,
        plan.profile_selection,
        lifecycle_id=lifecycle_id,
        created_at=moment,
        runtime=plan.runtime,
    )
    assert plan.created_at.endswith("Z")
    assert load_plan(plan.canonical_bytes()) == plan


def test_derive_plan_refuses_a_naive_time() -> None:
    plan = make_plan()
    with pytest.raises(PlanInvariantViolation) as caught:
        derive_plan(
            plan.request,
            plan.profile,
            plan.profile_selection,
            lifecycle_id=LIFECYCLE_ID,
            created_at=CREATED_AT.replace(tzinfo=None),
            runtime=plan.runtime,
        )
    assert caught.value.field == "created_at"


# -- each invariant rejects a mutated plan --------------------------------------------------------

Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for key in parents:
            data = data[key]
        data[last] = value

    return mutate


def _reprofile(path: str, value: Any) -> Mutation:
    """Change a profile value and fix up its recorded digest, so only the paths disagree."""

    def mutate(data: dict[str, Any]) -> None:
        _set(path, value)(data)
        data["profile_selection"]["profile_sha256"] = parse_profile(data["profile"]).sha256()

    return mutate


def _swap_id_in(field: str) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        other = "img-ffffffffffffffffffffffffffffffff"
        data["paths"][field] = data["paths"][field].replace(LIFECYCLE_ID, other)

    return mutate


IMPORT_MUTATIONS: list[tuple[str, Mutation, str]] = [
    (
        "candidate moved out",
        _set("paths.candidate", "/lustre/site/images/candidate.sqsh"),
        "paths.candidate",
    ),
    ("partial moved out", _set("paths.partial", "/tmp/candidate.sqsh.partial"), "paths.partial"),
    ("result moved out", _set("paths.result", "/tmp/inspection.json"), "paths.result"),
    ("sqsh swapped", _set("paths.sqsh", SQSH), "paths.sqsh"),
    ("stdout moved", _set("paths.stdout", "/tmp/slurm-%j.out"), "paths.stdout"),
    ("another id in the script path", _swap_id_in("script"), "paths.script"),
    ("another id in the inspector path", _swap_id_in("inspector"), "paths.inspector"),
    (
        "another lifecycle id",
        _set("lifecycle_id", "img-ffffffffffffffffffffffffffffffff"),
        "paths.job_dir",
    ),
    ("unsafe lifecycle id", _set("lifecycle_id", "../escape"), "lifecycle_id"),
    ("workspace moved", _reprofile("profile.workspace_root", "/other/ws"), "paths.job_dir"),
    ("operation swapped", _set("operation", "inspect_sqsh"), "operation"),
    ("source digest changed", _set("source_digest", f"sha256:{OTHER_HEX}"), "source_digest"),
    ("source digest dropped", _set("source_digest", None), "source_digest"),
    (
        "request source re-pinned",
        _set("request.source", PYTORCH.replace(DIGEST, f"sha256:{OTHER_HEX}")),
        "source_digest",
    ),
    (
        "enroot uri changed",
        _set("enroot_uri", f"docker://nvcr.io#nvidia/other:1@{DIGEST}"),
        "enroot_uri",
    ),
    (
        "enroot uri without registry",
        _set("enroot_uri", f"docker://nvidia/pytorch@{DIGEST}"),
        "enroot_uri",
    ),
    ("enroot uri dropped", _set("enroot_uri", None), "enroot_uri"),
    (
        "profile changed under its digest",
        _set("profile.image_build.partition", "gpu"),
        "profile_selection.profile_sha256",
    ),
    (
        "profile digest replaced",
        _set("profile_selection.profile_sha256", OTHER_HEX),
        "profile_selection.profile_sha256",
    ),
    ("created_at in +01:00", _set("created_at", "2025-01-02T04:04:05.678901+01:00"), "created_at"),
    ("created_at naive", _set("created_at", "2025-01-02T03:04:05.678901"), "created_at"),
    ("created_at garbage", _set("created_at", "yesterday"), "created_at"),
    (
        "runtime digest not hex",
        _set("runtime.inspector_sha256", "x" * 64),
        "runtime.inspector_sha256",
    ),
    ("rc digest short", _set("runtime.rc_sha256", "2" * 63), "runtime.rc_sha256"),
    ("schema version 6", _set("schema_version", 6), "schema_version"),
    ("unknown key", _set("extra", 1), "extra"),
]

INSPECT_MUTATIONS: list[tuple[str, Mutation, str]] = [
    (
        "candidate on an inspect plan",
        _set("paths.candidate", f"{JOB_DIR}/candidate.sqsh"),
        "paths.candidate",
    ),
    ("source digest on an inspect plan", _set("source_digest", DIGEST), "source_digest"),
    (
        "enroot uri on an inspect plan",
        _set("enroot_uri", f"docker://nvcr.io#a/b@{DIGEST}"),
        "enroot_uri",
    ),
    ("sqsh not the source", _set("paths.sqsh", "/lustre/images/other.sqsh"), "paths.sqsh"),
    ("operation swapped", _set("operation", "import_oci"), "operation"),
]


def _mutated(plan_bytes: bytes, mutate: Mutation) -> bytes:
    data = json.loads(plan_bytes)
    mutate(data)
    return canonical_json(data)


@pytest.mark.parametrize(
    ("mutate", "field"), [m[1:] for m in IMPORT_MUTATIONS], ids=[m[0] for m in IMPORT_MUTATIONS]
)
def test_import_plan_invariant_rejects_mutation(mutate: Mutation, field: str) -> None:
    with pytest.raises(PlanInvariantViolation) as caught:
        load_plan(_mutated(make_plan().canonical_bytes(), mutate))
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("mutate", "field"), [m[1:] for m in INSPECT_MUTATIONS], ids=[m[0] for m in INSPECT_MUTATIONS]
)
def test_inspect_plan_invariant_rejects_mutation(mutate: Mutation, field: str) -> None:
    plan = make_plan("inspect_sqsh", source=SQSH, role="serving")
    with pytest.raises(PlanInvariantViolation) as caught:
        load_plan(_mutated(plan.canonical_bytes(), mutate))
    assert caught.value.field == field


@pytest.mark.parametrize(
    "reencode",
    [
        lambda data: json.dumps(data, sort_keys=True).encode() + b"\n",
        lambda data: json.dumps(data, indent=2).encode() + b"\n",
        lambda data: canonical_json(data)[:-1],
        lambda data: canonical_json(data) + b"\n",
        lambda data: b" " + canonical_json(data),
        lambda data: json.dumps(data, sort_keys=True, indent=2, ensure_ascii=True).encode() + b"\n",
    ],
    ids=["compact", "unsorted", "no newline", "two newlines", "leading space", "ascii escapes"],
)
def test_load_plan_refuses_non_canonical_bytes(reencode: Callable[[Any], bytes]) -> None:
    plan = make_plan("inspect_sqsh", source="/données/é.sqsh")
    data = reencode(json.loads(plan.canonical_bytes()))
    assert data != plan.canonical_bytes()
    with pytest.raises(PlanInvariantViolation) as caught:
        load_plan(data)
    assert caught.value.field == "plan"


@pytest.mark.parametrize("data", [b"", b"{", b"[]", b"null", b"\xff\xfe"])
def test_load_plan_refuses_what_is_not_a_plan(data: bytes) -> None:
    with pytest.raises(PlanInvariantViolation):
        load_plan(data)


def test_load_plan_refuses_oversize_before_parsing() -> None:
    data = make_plan().canonical_bytes()
    padded = data[:-2] + b" " * (PLAN_MAX_BYTES - len(data) + 1) + b"}\n"
    assert len(padded) > PLAN_MAX_BYTES
    with pytest.raises(PlanInvariantViolation) as caught:
        load_plan(padded)
    assert caught.value.field == "plan"
    assert str(PLAN_MAX_BYTES) in caught.value.rule


def test_load_plan_refuses_duplicate_keys_as_non_canonical() -> None:
    data = make_plan().canonical_bytes()
    doubled = data.replace(b'{\n  "created_at"', b'{\n  "created_at": "x",\n  "created_at"', 1)
    assert doubled != data
    with pytest.raises(PlanInvariantViolation):
        load_plan(doubled)


def test_job_spec_carries_the_profile_values_and_the_marker() -> None:
    spec = make_plan(profile=FULL_PROFILE).job_spec()
    assert (spec.partition, spec.account, spec.qos) == ("cpu", "research", "normal")
    assert (spec.cpus_per_task, spec.memory, spec.time_limit) == (8, "32G", "2:30:00")
    assert spec.comment == f"slurm-image:{LIFECYCLE_ID}"
    assert spec.name == "slurm-image-client"
    assert spec.requeue is False
    assert spec.memory_mib == 32 * 1024
    assert spec.time_limit_minutes == 150
