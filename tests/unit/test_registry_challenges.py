"""How registries ask for credentials (domain/registry_auth.py): WWW-Authenticate challenges as
Docker Hub, GHCR, quay.io, NGC and registry 2.8 send them, a token service's answer, and
Retry-After."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_image.domain.errors import InvalidRegistryAnswer
from slurm_image.domain.registry_auth import (
    CHALLENGE_MAX,
    DEFAULT_TOKEN_LIFETIME_S,
    Challenge,
    parse_challenges,
    preferred_challenge,
    read_token_answer,
    retry_after_s,
)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (
            'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
            'scope="repository:library/ubuntu:pull"',
            Challenge("bearer", {"realm": "https://auth.docker.io/token",
                                 "service": "registry.docker.io",
                                 "scope": "repository:library/ubuntu:pull"}),
        ),
        (
            'Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:o/a:pull"',
            Challenge("bearer", {"realm": "https://ghcr.io/token", "service": "ghcr.io",
                                 "scope": "repository:o/a:pull"}),
        ),
        (
            'Bearer realm="https://nvcr.io/proxy_auth",scope="repository:nvidia/pytorch:pull"',
            Challenge("bearer", {"realm": "https://nvcr.io/proxy_auth",
                                 "scope": "repository:nvidia/pytorch:pull"}),
        ),
        ('Basic realm="slurm-image-test"', Challenge("basic", {"realm": "slurm-image-test"})),
        ("basic REALM=quay", Challenge("basic", {"realm": "quay"})),
        ('Bearer realm = "https://a/t" , service="s"',
         Challenge("bearer", {"realm": "https://a/t", "service": "s"})),
        ('Bearer realm="https://a/t",scope="repository:x:pull,push"',
         Challenge("bearer", {"realm": "https://a/t", "scope": "repository:x:pull,push"})),
        ('Bearer realm="with \\"quotes\\""', Challenge("bearer", {"realm": 'with "quotes"'})),
    ],
)  # fmt: skip
def test_challenges_of_real_registries_parse(header: str, expected: Challenge) -> None:
    assert parse_challenges(header) == [expected]


def test_several_challenges_in_one_header_parse_in_order_and_bearer_is_preferred() -> None:
    challenges = parse_challenges('Basic realm="r", Negotiate, Bearer realm="https://t/token"')
    assert [challenge.scheme for challenge in challenges] == ["basic", "negotiate", "bearer"]
    assert preferred_challenge(challenges) == Challenge("bearer", {"realm": "https://t/token"})
    assert preferred_challenge(parse_challenges("Negotiate")) is None


@pytest.mark.parametrize(
    "header",
    [
        'Bearer realm="unclosed',
        "=realm",
        'Bearer realm="x" service="y"',
        "Bearer realm=\x00x",
        "Bearer realm=" + "x" * CHALLENGE_MAX,
    ],
)
def test_malformed_challenges_are_refused(header: str) -> None:
    with pytest.raises(InvalidRegistryAnswer):
        parse_challenges(header, field="registry.example.org")


_name = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
_value = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=0, max_size=40
)


@given(st.sampled_from(["Basic", "Bearer"]), st.dictionaries(_name, _value, max_size=4))
def test_a_challenge_written_with_quoted_values_reads_back(
    scheme: str, params: dict[str, str]
) -> None:
    quoted = ", ".join(
        f'{key}="{value.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for key, value in params.items()
    )
    header = f"{scheme} {quoted}" if quoted else scheme
    assert parse_challenges(header) == [Challenge(scheme.lower(), params)]


@given(st.text(max_size=120))
def test_any_header_parses_or_is_refused_never_anything_else(header: str) -> None:
    try:
        challenges = parse_challenges(header)
    except InvalidRegistryAnswer:
        return
    assert all(challenge.scheme == challenge.scheme.lower() for challenge in challenges)


def test_a_token_answer_gives_its_token_and_lifetime() -> None:
    answer = read_token_answer(b'{"token": "abc.def", "expires_in": 300}', field="r")
    assert (answer.token, answer.lifetime_s) == ("abc.def", 300)
    assert "abc.def" not in repr(answer)
    oauth = read_token_answer(b'{"access_token": "t0k", "issued_at": "x"}', field="r")
    assert (oauth.token, oauth.lifetime_s) == ("t0k", DEFAULT_TOKEN_LIFETIME_S)


@pytest.mark.parametrize(
    "data",
    [b"[]", b"nope", b"{}", b'{"token": ""}', b'{"token": 5}', b'{"token": "a\\r\\nX-Evil: 1"}',
     json.dumps({"token": "x" * 70000}).encode()],
)  # fmt: skip
def test_a_token_answer_that_cannot_be_used_is_refused(data: bytes) -> None:
    with pytest.raises(InvalidRegistryAnswer):
        read_token_answer(data, field="r")


def test_a_token_lifetime_is_bounded_and_a_nonsense_one_is_the_default() -> None:
    assert read_token_answer(b'{"token": "t", "expires_in": 999999999}', field="r").lifetime_s == (
        24 * 3600
    )
    assert read_token_answer(b'{"token": "t", "expires_in": -5}', field="r").lifetime_s == 60


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after_s("7") == 7.0
    later = (now + timedelta(seconds=90)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert retry_after_s(later, now) == 90.0
    assert retry_after_s("Thu, 01 Jan 2015 00:00:00 GMT", now) == 0.0
    assert retry_after_s(None) is None
    assert retry_after_s("soon") is None
