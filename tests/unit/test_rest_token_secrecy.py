"""The JWT never appears in a repr, a log record or an error."""

from __future__ import annotations

import json
import logging
import os
import signal
from pathlib import Path

import httpx
import pytest

from slurm_image.adapters.slurmrest import RestSubmitter
from slurm_image.adapters.slurmrest.client import RestClient, TokenSource
from slurm_image.domain.job import JobSpec
from slurm_image.ports.submitter import SchedulerAuthError, SchedulerUnavailable
from slurm_image.submitters import RetryPolicy

SECRET = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXBheWxvYWQ.c2VjcmV0LXNpZ25hdHVyZQ"
SPEC = JobSpec(
    name="n",
    partition="build",
    cpus_per_task=1,
    memory="1G",
    time_limit="0:10:00",
    working_directory="/w",
    standard_output="/w/o",
    standard_error="/w/e",
    comment="slurm-image:img-1",
)


def _submitter(tmp_path: Path, handler) -> tuple[RestSubmitter, list[httpx.Request]]:  # type: ignore[no-untyped-def]
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    token_file = tmp_path / "jwt"
    token_file.write_text(f"SLURM_JWT={SECRET}\n")
    token_file.chmod(0o600)
    client = RestClient(
        "http://127.0.0.1:6820",
        user="alice",
        token=TokenSource(token_file=str(token_file)),
        transport=httpx.MockTransport(record),
    )
    submitter = RestSubmitter(
        url="http://127.0.0.1:6820",
        api_version="v0.0.38",
        client=client,
        retry_policy=RetryPolicy.immediate(2),
    )
    return submitter, seen


def test_the_token_is_sent_as_the_slurm_headers(tmp_path: Path) -> None:
    submitter, seen = _submitter(
        tmp_path, lambda r: httpx.Response(200, json={"errors": [], "job_id": 5})
    )
    assert submitter.submit(b"#!/bin/bash\ntrue\n", SPEC) == "5"
    assert seen[0].headers["X-SLURM-USER-TOKEN"] == SECRET
    assert seen[0].headers["X-SLURM-USER-NAME"] == "alice"
    body = json.loads(seen[0].content)
    assert SECRET not in json.dumps(body)


def test_the_token_is_in_no_repr_log_or_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    answers = iter(
        [
            httpx.Response(500, json={"errors": [{"error_code": 5005, "error": "Zero Bytes"}]}),
            httpx.Response(503, text="busy"),
            httpx.Response(503, text="busy"),
        ]
    )
    submitter, _ = _submitter(tmp_path, lambda r: next(answers))
    with pytest.raises(SchedulerAuthError) as auth:
        submitter.submit(b"#!/bin/bash\ntrue\n", SPEC)
    with pytest.raises(SchedulerUnavailable) as unavailable:
        submitter.states(["1"])
    texts = [
        repr(submitter),
        str(auth.value),
        repr(auth.value),
        str(unavailable.value),
        caplog.text,
    ]
    for text in texts:
        assert SECRET not in text
        assert "c2VjcmV0" not in text


def test_an_unreadable_token_file_is_an_auth_error_naming_the_file(tmp_path: Path) -> None:
    source = TokenSource(token_file=str(tmp_path / "missing"))
    with pytest.raises(SchedulerAuthError) as caught:
        source.read()
    assert caught.value.field == "token_file"


def test_a_token_from_an_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_JWT", SECRET)
    assert TokenSource(token_env="MY_JWT").read() == SECRET
    assert SECRET not in repr(TokenSource(token_env="MY_JWT"))
    monkeypatch.delenv("MY_JWT")
    with pytest.raises(SchedulerAuthError):
        TokenSource(token_env="MY_JWT").read()


BAD_TOKEN_FILES = {
    "non-ASCII": "eyJhbGciOiJIUzI1NiJ9.c2Vj\u00e9cmV0.c2ln\n".encode(),
    "not UTF-8": b"eyJhbGciOiJIUzI1NiJ9.c2Vj\xffcmV0.c2ln\n",
}


@pytest.mark.parametrize("content", BAD_TOKEN_FILES.values(), ids=BAD_TOKEN_FILES.keys())
def test_a_token_that_cannot_be_a_header_is_an_auth_error_before_any_request(
    tmp_path: Path, content: bytes
) -> None:
    submitter, seen = _submitter(
        tmp_path, lambda r: httpx.Response(200, json={"errors": [], "job_id": 5})
    )
    (tmp_path / "jwt").write_bytes(content)
    with pytest.raises(SchedulerAuthError) as caught:
        submitter.submit(b"#!/bin/bash\ntrue\n", SPEC)
    assert seen == []
    assert "c2Vj" not in str(caught.value)


def test_a_token_file_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "jwt"
    os.mkfifo(fifo)

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError("reading the token blocked")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(5)  # a blocking open fails the test instead of hanging it
    try:
        with pytest.raises(SchedulerAuthError, match="not a regular file"):
            TokenSource(token_file=str(fifo)).read()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
