"""slurmrestd request and response mappings, per API version, against recorded shapes.

Fixtures under tests/fixtures/slurmrest/ are named by their source: excerpts of the published
OpenAPI specifications (SlinkyProject/slurm-client for v0.0.41 and v0.0.44; the generated model
documentation of mever-team/slurm-rest-py for v0.0.40), answers recorded from real slurmrestd
(rackslab/Slurm-web test assets for 23.11, 24.05, 24.11) and answers recorded from this
project's local clusters (``local-slurmrestd-<release>__<version>__<what>[-http-<status>]``:
22.05.8 on v0.0.38; 24.11.5 on v0.0.40, v0.0.41 and v0.0.42; 26.05.5 on v0.0.42 to v0.0.45, with
the excerpt of the specification it serves; by tests/fixtures/slurmrest/record_local.py). The
job times are in every recorded job answer and in the SlinkyProject excerpts of v0.0.41,
v0.0.43, v0.0.44 and v0.0.45.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from slurm_image.adapters.slurmrest.client import RestClient
from slurm_image.adapters.slurmrest.data_parser import exit_code_of, no_val
from slurm_image.adapters.slurmrest.errors import classify
from slurm_image.adapters.slurmrest.versions import (
    SUPPORTED,
    discover_once,
    mapping_for,
    versions_in_spec,
)
from slurm_image.domain.job import JobSpec, JobState
from slurm_image.domain.rest_api import REST_API_VERSIONS
from slurm_image.ports.submitter import SchedulerAuthError, SchedulerRejected, UnknownJob
from slurm_image.submitters import TransientFailure

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "slurmrest"
SPEC = JobSpec(
    name="slurm-image-client",
    partition="build",
    account="research",
    qos="normal",
    cpus_per_task=4,
    memory="16G",
    time_limit="1:00:30",
    working_directory="/ws/images/.tmp/jobs/img-1",
    standard_output="/ws/images/.tmp/jobs/img-1/slurm-%j.out",
    standard_error="/ws/images/.tmp/jobs/img-1/slurm-%j.err",
    comment="slurm-image:img-1",
)
ENV = {"PATH": "/usr/bin:/bin"}
SCRIPT = "#!/bin/bash -p\ntrue\n"


def load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


def _conforms(value: object, schema: dict[str, Any], version: str) -> bool:
    ref = schema.get("$ref", "")
    if ref.endswith("_string_array"):
        return isinstance(value, list) and all(isinstance(item, str) for item in value)
    if ref.endswith(("_uint32_no_val_struct", "_uint64_no_val_struct")):
        # the no_val shape as recorded answers show it: {"set", "infinite", "number"}
        return (
            isinstance(value, dict)
            and set(value) <= {"set", "infinite", "number"}
            and value.get("set") is True
            and isinstance(value.get("number"), int)
        )
    kind = schema.get("type")
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    raise AssertionError(f"{version}: no rule for schema {schema}")


def test_v0_0_38_submit_body_as_measured_live() -> None:
    body = mapping_for("v0.0.38").submit_body(SCRIPT, SPEC, ENV)
    assert body["script"] == SCRIPT
    job = body["job"]
    assert job["environment"] == {"PATH": "/usr/bin:/bin"}
    assert job["memory_per_node"] == 16 * 1024
    assert job["time_limit"] == 61
    assert job["nodes"] == [1, 1]
    assert "maximum_nodes" not in job  # refused by 22.05: Unknown key "maximum_nodes"


@pytest.mark.parametrize(
    ("version", "fixture"),
    [
        ("v0.0.41", "slinky-slurm-client__v0041__openapi.excerpt.json"),
        ("v0.0.44", "slinky-slurm-client__v0044__openapi.excerpt.json"),
        # v0.0.42 and v0.0.43 lie between two published specs that agree on every field used:
        ("v0.0.42", "slinky-slurm-client__v0041__openapi.excerpt.json"),
        ("v0.0.42", "slinky-slurm-client__v0044__openapi.excerpt.json"),
        ("v0.0.43", "slinky-slurm-client__v0041__openapi.excerpt.json"),
        ("v0.0.43", "slinky-slurm-client__v0044__openapi.excerpt.json"),
        # the specification a live 26.05 slurmrestd serves, for each of its versions
        ("v0.0.42", "local-slurmrestd-26.05.5__v0.0.42__openapi.excerpt.json"),
        ("v0.0.43", "local-slurmrestd-26.05.5__v0.0.43__openapi.excerpt.json"),
        ("v0.0.44", "local-slurmrestd-26.05.5__v0.0.44__openapi.excerpt.json"),
        ("v0.0.45", "local-slurmrestd-26.05.5__v0.0.45__openapi.excerpt.json"),
    ],
)
def test_submit_body_matches_the_published_spec(version: str, fixture: str) -> None:
    if fixture.startswith("local-"):
        published = fixture.split("__")[1]
    else:
        published = "v0.0." + fixture.split("__v00")[1][:2]
    schemas = load(fixture)["components"]["schemas"]
    request = schemas[f"{published}_job_submit_req"]["properties"]
    job_props = schemas[f"{published}_job_desc_msg"]["properties"]
    body = mapping_for(version).submit_body(SCRIPT, SPEC, ENV)
    assert set(body) <= set(request)
    for key, value in body["job"].items():
        assert key in job_props, f"{published}: job_desc_msg has no {key!r}"
        assert _conforms(value, job_props[key], published), f"{published}: {key}={value!r}"


def test_submit_body_v0_0_40_matches_the_published_model() -> None:
    table = load("mever-team-slurm-rest-py__V0040JobDescMsg.excerpt.json")
    types = table["V0040JobDescMsg"]
    body = mapping_for("v0.0.40").submit_body(SCRIPT, SPEC, ENV)
    assert set(body) <= set(table["V0040JobSubmitReq"])
    python_types = {"str": str, "int": int, "bool": bool}
    for key, value in body["job"].items():
        kind = types[key]
        if kind in python_types:
            assert isinstance(value, python_types[kind]), key
        elif kind == "List[str]":
            assert all(isinstance(item, str) for item in value), key
        else:
            assert kind.startswith("V0040Uint") and value["set"] is True, key


@pytest.mark.parametrize("version", [v for v in REST_API_VERSIONS if v != "v0.0.38"])
def test_every_spec_value_travels_in_the_job_description(version: str) -> None:
    job = mapping_for(version).submit_body(SCRIPT, SPEC, ENV)["job"]
    assert job["script"] == SCRIPT
    assert job["name"] == "slurm-image-client"
    assert job["partition"] == "build"
    assert job["account"] == "research"
    assert job["qos"] == "normal"
    assert job["cpus_per_task"] == 4
    assert job["memory_per_node"] == {"set": True, "infinite": False, "number": 16384}
    assert job["time_limit"] == {"set": True, "infinite": False, "number": 61}
    assert job["current_working_directory"] == SPEC.working_directory
    assert job["standard_output"] == SPEC.standard_output
    assert job["standard_error"] == SPEC.standard_error
    assert job["comment"] == "slurm-image:img-1"
    assert job["requeue"] is False
    assert job["environment"] == ["PATH=/usr/bin:/bin"]
    assert (job["minimum_nodes"], job["maximum_nodes"], job["tasks"]) == (1, 1, 1)


# (release, version) of every local slurmrestd recorded by tests/fixtures/slurmrest/record_local.py
LIVE = [
    ("22.05.8", "v0.0.38"),
    ("24.11.5", "v0.0.40"),
    ("24.11.5", "v0.0.41"),
    ("24.11.5", "v0.0.42"),
    ("26.05.5", "v0.0.42"),
    ("26.05.5", "v0.0.43"),
    ("26.05.5", "v0.0.44"),
    ("26.05.5", "v0.0.45"),
]
LIVE_DATA_PARSER = [(release, version) for release, version in LIVE if version != "v0.0.38"]
LIVE_26_05 = [version for release, version in LIVE if release == "26.05.5"]


def recorded(release: str, version: str, what: str) -> tuple[int | None, dict[str, Any]]:
    """The recorded answer ``what`` and its HTTP status (named in the file, when recorded)."""
    [path] = FIXTURES.glob(f"local-slurmrestd-{release}__{version}__{what}*.json")
    status = path.stem.rsplit("-http-", 1)[1] if "-http-" in path.stem else None
    return (int(status) if status else None), json.loads(path.read_text())


@pytest.mark.parametrize(("release", "version"), LIVE)
def test_answers_recorded_live(release: str, version: str) -> None:
    mapping = mapping_for(version)
    status, ok = recorded(release, version, "submit-ok")
    assert status == 200
    assert mapping.submitted_job_id(ok) == str(ok["job_id"])
    [failed] = mapping.job_records(recorded(release, version, "job-failed-exit-3")[1])
    assert (failed.status.state, failed.status.exit_code) == (JobState.FAILED, 3)
    assert failed.status.reason == "NonZeroExitCode"
    assert failed.comment == "slurm-image:img-fixture"
    [killed] = mapping.job_records(recorded(release, version, "job-signalled-9")[1])
    assert (killed.status.state, killed.status.exit_code) == (JobState.FAILED, 128 + 9)
    [cancelled] = mapping.job_records(recorded(release, version, "job-cancelled-running")[1])
    assert cancelled.status.state is JobState.CANCELLED


@pytest.mark.parametrize(("release", "version"), LIVE)
def test_job_times_recorded_live(release: str, version: str) -> None:
    mapping = mapping_for(version)
    for what in ("job-failed-exit-3", "job-signalled-9", "job-cancelled-running"):
        body = recorded(release, version, what)[1]
        [job] = body["jobs"]
        [record] = mapping.job_records(body)
        start, end = job["start_time"], job["end_time"]
        if isinstance(start, dict):  # a no-val number from v0.0.40 on
            start, end = start["number"], end["number"]
        assert record.status.started_at == datetime.fromtimestamp(start, UTC), what
        assert record.status.ended_at == datetime.fromtimestamp(end, UTC), what
        assert record.status.run_seconds == end - start >= 0, what


SPECIFIED_TIMES = [
    ("v0.0.41", "slinky-slurm-client__v0041__openapi.excerpt.json"),
    ("v0.0.43", "slinky-slurm-client__v0043__openapi.excerpt.json"),
    ("v0.0.44", "slinky-slurm-client__v0044__openapi.excerpt.json"),
    ("v0.0.45", "slinky-slurm-client__v0045__openapi.excerpt.json"),
]


@pytest.mark.parametrize(("version", "fixture"), SPECIFIED_TIMES)
def test_job_times_as_the_published_spec_gives_them(version: str, fixture: str) -> None:
    """start_time and end_time are uint64 no-val numbers (real or expected): a finished job's
    are read, a running job's end and a pending job's start are not facts, and an unset one is
    no time."""
    info = load(fixture)["components"]["schemas"][f"{version}_job_info"]["properties"]
    for key in ("start_time", "end_time"):
        assert info[key]["$ref"].endswith(f"/{version}_uint64_no_val_struct")
    mapping = mapping_for(version)

    def job(state: str, start: dict[str, Any], end: dict[str, Any]) -> Any:
        body = {"jobs": [{"job_id": no_val(7), "job_state": [state], "exit_code": {
            "return_code": no_val(0)}, "start_time": start, "end_time": end}]}  # fmt: skip
        [record] = mapping.job_records(body)
        return record.status

    unset = {"set": False, "infinite": False, "number": 0}
    done = job("COMPLETED", no_val(1769860800), no_val(1769860812))
    assert (done.started_at, done.run_seconds) == (datetime(2026, 1, 31, 12, tzinfo=UTC), 12.0)
    running = job("RUNNING", no_val(1769860800), no_val(1769864400))
    assert (running.started_at, running.ended_at) == (datetime(2026, 1, 31, 12, tzinfo=UTC), None)
    pending = job("PENDING", no_val(1769860800), no_val(1769864400))
    assert (pending.started_at, pending.ended_at) == (None, None)
    assert job("COMPLETED", unset, unset).run_seconds is None


@pytest.mark.parametrize(("release", "version"), LIVE_DATA_PARSER)
def test_answers_name_their_data_parser(release: str, version: str) -> None:
    _, ok = recorded(release, version, "submit-ok")
    assert ok["meta"]["plugin"]["data_parser"] == f"data_parser/{version}"


def test_every_version_recorded_live_is_one_the_adapter_serves() -> None:
    assert tuple(SUPPORTED) == REST_API_VERSIONS
    assert {version for _, version in LIVE} == set(REST_API_VERSIONS)


@pytest.mark.parametrize("version", LIVE_26_05)
def test_26_05_refuses_a_job_without_environment_naming_the_job(version: str) -> None:
    status, body = recorded("26.05.5", version, "submit-no-environment")
    assert status == 422
    error = classify("submit", status, mapping_for(version).errors(body), "")
    assert isinstance(error, SchedulerRejected)
    assert error.field == "job"
    assert "Environment is missing" in error.reason


@pytest.mark.parametrize("version", LIVE_26_05)
def test_26_05_ping_answers_name_the_primary_controller(version: str) -> None:
    mapping = mapping_for(version)
    _, ok = recorded("26.05.5", version, "ping-ok")
    [(said, up)] = mapping.controllers(ok)
    assert up is True
    assert said.endswith("UP") and "(primary)" in said
    # a refused token: the ping still answers 200, with the controller not responding
    status, refused = recorded("26.05.5", version, "ping-bad-token")
    assert status == 200
    assert classify("ping", status, mapping.errors(refused), "") is None
    [(said, up)] = mapping.controllers(refused)
    assert up is False
    assert "DOWN" in said
    status, nodes = recorded("26.05.5", version, "nodes-bad-token")
    assert isinstance(classify("ping", status or 0, mapping.errors(nodes), ""), SchedulerAuthError)


def test_the_v0_0_45_ping_entry_has_a_status_and_no_mode() -> None:
    _, refused = recorded("26.05.5", "v0.0.45", "ping-bad-token")
    [entry] = refused["pings"]
    assert "pinged" not in entry and "mode" not in entry
    [(said, _)] = mapping_for("v0.0.45").controllers(refused)
    assert said.endswith("DOWN (Protocol authentication error)")


@pytest.mark.parametrize(("release", "version"), LIVE)
@pytest.mark.parametrize(
    ("what", "expected", "field"),
    [
        ("submit-bad-partition", SchedulerRejected, "partition"),
        ("submit-bad-token", SchedulerAuthError, "credentials"),
        ("job-unknown", UnknownJob, "job_id"),
    ],
)
def test_errors_recorded_live(
    release: str, version: str, what: str, expected: type, field: str
) -> None:
    status, body = recorded(release, version, what)
    assert status is not None
    error = classify("op", status, mapping_for(version).errors(body), "")
    assert isinstance(error, expected)
    assert error.field == field  # type: ignore[union-attr]


@pytest.mark.parametrize(("release", "version"), LIVE)
def test_cancel_answers_recorded_live(release: str, version: str) -> None:
    mapping = mapping_for(version)
    for what in ("cancel-running", "cancel-finished"):
        status, body = recorded(release, version, what)
        assert status is not None
        assert classify("cancel", status, mapping.errors(body), "") is None
    status, body = recorded(release, version, "cancel-unknown")
    assert status is not None
    unknown = classify("cancel", status, mapping.errors(body), "")
    # v0.0.40/41 answer an unknown job's cancel like any other: the submitter looks it up.
    assert mapping.cancel_names_unknown_jobs is (version not in ("v0.0.40", "v0.0.41"))
    if mapping.cancel_names_unknown_jobs:
        assert isinstance(unknown, UnknownJob)
    else:
        assert unknown is None


@pytest.mark.parametrize("version", REST_API_VERSIONS)
def test_a_finished_job_without_a_readable_exit_code_says_so(version: str) -> None:
    shapes: dict[str, Any] = {
        "v0.0.38": {"job_id": 7, "job_state": "FAILED", "state_reason": "NonZeroExitCode"},
    }
    job = shapes.get(
        version,
        {
            "job_id": 7,
            "job_state": ["FAILED"],
            "state_reason": "NonZeroExitCode",
            "exit_code": {"status": ["INVALID"], "return_code": {"set": False, "number": 0}},
        },
    )
    [record] = mapping_for(version).job_records({"jobs": [job]})
    assert record.status.exit_code is None
    assert record.status.reason is not None
    assert record.status.reason.startswith("NonZeroExitCode; exit code unreadable: ")


def test_v0_0_40_job_recorded_from_23_11() -> None:
    [record] = mapping_for("v0.0.40").job_records(
        load("rackslab-slurm-web__23.11__slurm-job-failed.excerpt.json")
    )
    assert record.status.job_id == "1717"
    assert record.status.state is JobState.FAILED
    assert record.status.exit_code == 1
    assert record.status.reason == "NonZeroExitCode"


def test_v0_0_41_signalled_exit_recorded_from_24_05() -> None:
    job = load("rackslab-slurm-web__24.05__slurm-job-timeout.excerpt.json")["jobs"][0]
    assert exit_code_of(job["exit_code"]) == 128 + 15


def test_v0_0_42_unknown_job_recorded_from_24_11() -> None:
    body = load("rackslab-slurm-web__24.11__slurm-job-unfound.excerpt.json")
    mapping = mapping_for("v0.0.42")
    assert mapping.job_records(body) == []
    error = classify("status", 500, mapping.errors(body), "")
    assert isinstance(error, UnknownJob)


@pytest.mark.parametrize("version", ["v0.0.41", "v0.0.44"])
def test_submit_answer_per_published_spec(version: str) -> None:
    # Only the properties the published openapi_job_submit_response lists.
    fixture = f"slinky-slurm-client__v00{version[-2:]}__openapi.excerpt.json"
    schema = load(fixture)["components"]["schemas"][f"{version}_openapi_job_submit_response"]
    answer = {"job_id": 1234, "step_id": "batch", "errors": [], "warnings": []}
    assert set(answer) <= set(schema["properties"])
    assert mapping_for(version).submitted_job_id(answer) == "1234"


def test_the_v0_0_41_deprecated_result_object_is_read_too() -> None:
    assert (
        "result"
        in load("slinky-slurm-client__v0041__openapi.excerpt.json")["components"]["schemas"][
            "v0.0.41_openapi_job_submit_response"
        ]["properties"]
    )
    assert mapping_for("v0.0.41").submitted_job_id({"result": {"job_id": 77}}) == "77"


@pytest.mark.parametrize(
    ("status", "errors", "expected", "ambiguous"),
    [
        (
            500,
            [{"error_code": 1800, "error": "Unable to contact slurm controller"}],
            TransientFailure,
            False,
        ),
        (500, [{"error_number": 5004, "error": "Socket timed out"}], TransientFailure, True),
        (502, [], TransientFailure, True),
        (503, [], TransientFailure, True),
        (504, [], TransientFailure, True),
        (401, [], SchedulerAuthError, None),
        (
            500,
            [{"error_code": 5005, "error": "Zero Bytes were transmitted or received"}],
            SchedulerAuthError,
            None,
        ),
        (
            500,
            [{"error_code": 2005, "error": "More processors requested than permitted"}],
            SchedulerRejected,
            None,
        ),
        (400, [{"error_code": 9001, "error": "Failure during parsing"}], SchedulerRejected, None),
        (404, [], SchedulerRejected, None),
    ],
)
def test_rest_error_classification(
    status: int, errors: list[dict[str, Any]], expected: type, ambiguous: bool | None
) -> None:
    for version in SUPPORTED:
        error = classify("submit", status, mapping_for(version).errors({"errors": errors}), "")
        assert isinstance(error, expected), version
        if ambiguous is not None:
            assert error.ambiguous is ambiguous  # type: ignore[union-attr]


def test_success_is_not_an_error() -> None:
    assert classify("submit", 200, [], "{}") is None


def test_discovery_reads_the_submit_paths_of_the_spec() -> None:
    paths = {"/slurm/v0.0.38/job/submit": {}, "/slurm/v0.0.41/job/submit": {}, "/openapi/v3": {}}
    assert versions_in_spec(paths) == ["v0.0.38", "v0.0.41"]
    assert versions_in_spec(None) == []


def test_an_unsupported_version_is_refused() -> None:
    with pytest.raises(SchedulerRejected) as caught:
        mapping_for("v0.0.39")
    assert caught.value.field == "api_version"


@pytest.mark.parametrize(
    ("offered", "picked"),
    [
        (["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"], "v0.0.45"),  # Slurm 26.05
        (["v0.0.44", "v0.0.45", "v0.0.46"], "v0.0.45"),  # a newer server: the newest both know
        (["v0.0.39", "v0.0.40"], "v0.0.40"),
    ],
)
def test_auto_picks_the_newest_version_both_sides_know(offered: list[str], picked: str) -> None:
    paths = {f"/slurm/{version}/job/submit": {} for version in offered}

    def handle(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/openapi/v3"
        return httpx.Response(200, json={"paths": paths})

    client = RestClient("unix:///nonexistent.sock", transport=httpx.MockTransport(handle))
    assert discover_once(client).version == picked
