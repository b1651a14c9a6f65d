"""Job ids, state names and exit statuses as Slurm prints them; squeue output; stderr meaning."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from slurm_image.adapters.sbatch import SbatchSubmitter, parse_squeue_marker, parse_squeue_states
from slurm_image.adapters.sbatch_errors import classify
from slurm_image.adapters.slurm_fields import (
    CLIENT_TIME_ZONE,
    UnreadableExitCode,
    bounded,
    exit_code_from_squeue,
    exit_code_from_wait_status,
    parse_job_id,
    parse_state,
    parse_state_list,
    time_from_client,
    time_from_epoch,
)
from slurm_image.domain.job import JobSpec, JobState
from slurm_image.ports.submitter import SchedulerAuthError, SchedulerRejected
from slurm_image.submitters import TransientFailure


@pytest.mark.parametrize("text", ["1", "42\n", "4294967295"])
def test_job_ids_in_range_are_accepted(text: str) -> None:
    assert parse_job_id(text) == text.strip()


@pytest.mark.parametrize(
    "text", ["", "0", "042", "4294967296", "-1", "12 ", " 12", "1e3", "12\n13", "١٢", "12_1"]
)
def test_anything_but_a_plain_decimal_id_is_refused(text: str) -> None:
    with pytest.raises(SchedulerRejected) as caught:
        parse_job_id(text)
    assert caught.value.field == "job_id"


def test_a_cluster_qualified_id_is_refused_as_multi_cluster() -> None:
    with pytest.raises(SchedulerRejected, match="multi-cluster"):
        parse_job_id("123;other")


def test_bounded_strips_control_characters_and_bounds_length() -> None:
    assert bounded("a\x1b[31mb\x00c\nnext line") == "a[31mbc | next line"
    assert len(bounded("x" * 5000)) == 2000


@pytest.mark.parametrize(
    ("name", "state"),
    [
        ("PENDING", JobState.PENDING),
        ("CANCELLED by 0", JobState.CANCELLED),
        ("OUT_OF_MEMORY", JobState.OUT_OF_MEMORY),
        ("CONFIGURING", JobState.PENDING),
        ("REQUEUE_HOLD", JobState.REQUEUED),
        ("SPECIAL_EXIT", JobState.FAILED),
        ("SOMETHING_NEW", JobState.UNKNOWN),
    ],
)
def test_state_names(name: str, state: JobState) -> None:
    assert parse_state(name) is state


def test_state_lists_take_the_base_state_not_the_flags() -> None:
    assert parse_state_list(["COMPLETING", "RUNNING"]) is JobState.RUNNING
    assert parse_state_list(["FAILED"]) is JobState.FAILED
    assert parse_state_list(["COMPLETING"]) is JobState.COMPLETING
    assert parse_state_list([]) is JobState.UNKNOWN


@pytest.mark.parametrize(("raw", "code"), [(0, 0), (768, 3), (256 * 255, 255), (9, 137), (15, 143)])
def test_wait_status_decoding(raw: int, code: int) -> None:
    assert exit_code_from_wait_status(raw) == code


def test_squeue_states_keep_only_the_asked_ids() -> None:
    output = (
        "1|FAILED|2026-01-31T12:00:00|2026-01-31T12:00:03|NonZeroExitCode|768|\n"
        "2|RUNNING|2026-01-31T12:00:00|NONE|None|0|\n"
        "3_1|PENDING|Unknown|NONE|Priority|0|\n"
        "4|PENDING|N/A|NONE|ReqNodeNotAvail, UnavailableNodes:vm|0|\n"
        "garbage\n"
    )
    states = parse_squeue_states(output, ["1", "2", "4", "99"])
    assert set(states) == {"1", "2", "4"}
    assert states["1"].state is JobState.FAILED
    assert states["1"].exit_code == 3
    assert states["1"].reason == "NonZeroExitCode"
    assert states["2"].exit_code is None
    assert states["2"].reason is None
    assert states["4"].reason == "ReqNodeNotAvail, UnavailableNodes:vm"


@pytest.mark.parametrize(
    ("printed", "code"),
    [
        # Slurm 22.05: the raw wait status
        ("0", 0),
        ("768", 3),
        ("19968", 78),
        ("9", 137),
        (" 768 ", 3),
        # Slurm 24.11: exit:signal
        ("0:0", 0),
        ("3:0", 3),
        ("78:0", 78),
        ("255:0", 255),
        ("0:9", 137),
        ("0:15", 143),
    ],
)
def test_squeue_exit_codes_in_every_printed_form(printed: str, code: int) -> None:
    assert exit_code_from_squeue(printed) == code


@pytest.mark.parametrize(
    "printed",
    ["", "N/A", "3:", ":0", "-1", "3:0:0", "256:0", "0:128", "70000", "3.0", "١٢", "3 :0"],
)
def test_an_unknown_exit_code_form_is_unreadable_not_success(printed: str) -> None:
    with pytest.raises(UnreadableExitCode) as caught:
        exit_code_from_squeue(printed)
    assert caught.value.value == bounded(printed, 80)


def test_squeue_states_read_the_24_11_exit_signal_form() -> None:
    output = (
        "1|FAILED|2026-01-31T12:00:00|2026-01-31T12:00:03|NonZeroExitCode|78:0|\n"
        "2|FAILED|2026-01-31T12:00:00|2026-01-31T12:00:03|RaisedSignal:9(Killed)|0:9|\n"
        "3|COMPLETED|2026-01-31T12:00:00|2026-01-31T12:00:03|None|0:0|\n"
        "4|RUNNING|2026-01-31T12:00:00|NONE|None|0:0|\n"
    )
    states = parse_squeue_states(output, ["1", "2", "3", "4"])
    assert [states[i].exit_code for i in "1234"] == [78, 137, 0, None]
    assert states["1"].reason == "NonZeroExitCode"


def test_an_unreadable_exit_code_of_a_finished_job_is_reported_in_its_reason() -> None:
    output = (
        "1|FAILED|2026-01-31T12:00:00|2026-01-31T12:00:03|NonZeroExitCode|x7|\n"
        "2|COMPLETED|2026-01-31T12:00:00|2026-01-31T12:00:03|None||\n"
        "3|RUNNING|2026-01-31T12:00:00|NONE|None|x7|\n"
    )
    states = parse_squeue_states(output, ["1", "2", "3"])
    assert states["1"].state is JobState.FAILED
    assert states["1"].exit_code is None
    assert states["1"].reason == "NonZeroExitCode; exit code unreadable: 'x7'"
    assert states["2"].exit_code is None
    assert states["2"].reason == "exit code unreadable: ''"
    assert states["3"].reason is None  # a running job has no exit code yet


def test_squeue_states_carry_the_times_a_job_ran_in_utc() -> None:
    output = (
        "1|FAILED|2026-01-31T12:00:00|2026-01-31T12:00:03|NonZeroExitCode|768|\n"
        "2|RUNNING|2026-01-31T12:00:00|2026-01-31T13:00:00|None|0|\n"
        "3|PENDING|2026-02-01T00:00:00|2026-02-01T01:00:00|BeginTime|0|\n"
        "4|CANCELLED|2026-01-31T12:00:05|2026-01-31T12:00:05|None|0|\n"
        "5|COMPLETED|Unknown|Unknown|None|0|\n"
        "6|FAILED|2026-01-31T12:00:09|2026-01-31T12:00:03|a|reason|with|bars|768|\n"
    )
    states = parse_squeue_states(output, ["1", "2", "3", "4", "5", "6"])
    noon = datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert (states["1"].started_at, states["1"].ended_at) == (noon, noon + timedelta(seconds=3))
    assert states["1"].run_seconds == 3.0
    # a running job's end is its time limit's, a pending job's start an estimate: neither a fact
    assert (states["2"].started_at, states["2"].ended_at) == (noon, None)
    assert (states["3"].started_at, states["3"].ended_at) == (None, None)
    # cancelled while pending: Slurm sets both to the time of the cancel
    assert states["4"].run_seconds == 0.0
    assert (states["5"].started_at, states["5"].run_seconds) == (None, None)
    # an end before the start is no time at all; the reason keeps its bars
    assert (states["6"].started_at, states["6"].ended_at) == (None, None)
    assert states["6"].reason == "a|reason|with|bars"


@pytest.mark.parametrize(
    ("printed", "moment"),
    [
        ("2026-01-31T12:00:00", datetime(2026, 1, 31, 12, tzinfo=UTC)),
        (" 2026-01-31T12:00:00 ", datetime(2026, 1, 31, 12, tzinfo=UTC)),
        ("NONE", None),
        ("Unknown", None),
        ("N/A", None),
        ("", None),
        ("2026-01-31", None),
        ("2026-13-31T12:00:00", None),
        ("2026-01-31T12:00:00+02:00", None),
    ],
)
def test_client_times_are_utc_or_none(printed: str, moment: datetime | None) -> None:
    assert time_from_client(printed) == moment


@pytest.mark.parametrize(
    ("value", "moment"),
    [
        (1769860800, datetime(2026, 1, 31, 12, tzinfo=UTC)),
        (0, None),
        (-1, None),
        (True, None),
        ("1769860800", None),
        (2**63, None),
        (None, None),
    ],
)
def test_rest_times_are_epoch_seconds_or_none(value: object, moment: datetime | None) -> None:
    assert time_from_epoch(value) == moment


def test_the_sbatch_adapter_asks_its_clients_for_utc() -> None:
    submitter = SbatchSubmitter(environ={"PATH": "/usr/bin", "TZ": "America/New_York"})
    assert submitter._env["TZ"] == CLIENT_TIME_ZONE == "UTC0"


def test_squeue_marker_lookup_matches_the_whole_comment() -> None:
    output = "7|slurm-image:img-a|b\n8|slurm-image:img-a\n9|slurm-image:img-ab\n"
    assert parse_squeue_marker(output, "slurm-image:img-a") == "8"
    assert parse_squeue_marker(output, "slurm-image:img-a|b") == "7"
    assert parse_squeue_marker(output, "slurm-image:none") is None


def test_every_spec_value_becomes_an_sbatch_option() -> None:
    spec = JobSpec(
        name="n",
        partition="build",
        account="acct",
        qos="q",
        cpus_per_task=4,
        memory="16G",
        time_limit="1:00:00",
        working_directory="/w",
        standard_output="/w/o",
        standard_error="/w/e",
        comment="slurm-image:img-1",
    )
    assert spec.sbatch_options() == [
        "--job-name=n",
        "--account=acct",
        "--qos=q",
        "--partition=build",
        "--nodes=1",
        "--ntasks=1",
        "--cpus-per-task=4",
        "--mem=16G",
        "--time=1:00:00",
        "--chdir=/w",
        "--output=/w/o",
        "--error=/w/e",
        "--no-requeue",
        "--comment=slurm-image:img-1",
    ]


# stderr lines measured on Slurm 22.05 (docs/slurm.md)
@pytest.mark.parametrize(
    ("stderr", "field"),
    [
        (
            "sbatch: error: Batch job submission failed: Invalid partition name specified",
            "partition",
        ),
        ("sbatch: error: Invalid --time specification", "time_limit"),
        (
            "sbatch: error: Batch job submission failed: More processors requested than permitted",
            "cpus_per_task",
        ),
        (
            "sbatch: error: Batch job submission failed: "
            "Requested node configuration is not available",
            "resources",
        ),
        ("sbatch: error: This does not look like a batch script.", "script"),
        ("sbatch: error: Batch script is empty!", "script"),
        ("sbatch: error: something nobody has seen", "sbatch"),
    ],
)
def test_permanent_refusals_name_their_field(stderr: str, field: str) -> None:
    error = classify("sbatch", stderr, 1)
    assert isinstance(error, SchedulerRejected)
    assert error.field == field
    assert "sbatch: error" in error.reason


def test_an_unreachable_controller_is_transient_and_unambiguous() -> None:
    error = classify(
        "sbatch",
        "sbatch: error: Batch job submission failed: "
        "Unable to contact slurm controller (connect failure)",
        1,
    )
    assert isinstance(error, TransientFailure)
    assert not error.ambiguous


def test_a_socket_timeout_is_transient_and_ambiguous() -> None:
    error = classify("sbatch", "sbatch: error: Socket timed out on send/recv operation", 1)
    assert isinstance(error, TransientFailure)
    assert error.ambiguous


def test_credential_trouble_is_an_auth_error() -> None:
    error = classify("sbatch", "sbatch: error: Invalid authentication credential", 1)
    assert isinstance(error, SchedulerAuthError)
