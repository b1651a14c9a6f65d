"""References by tag, which ``resolve`` pins: the one grammar of the pinned reference (same
registry, path and tag rules), with the tag required and a digest refused; a pin of one is the
reference an import takes, exactly as typed."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_image.domain.errors import InvalidReference
from slurm_image.domain.reference import parse_reference, parse_tag_reference
from support import DIGEST

HUB = "registry-1.docker.io"

_alnum = st.text(alphabet=string.ascii_lowercase + string.digits, min_size=1, max_size=6)
_separator = st.sampled_from([".", "_", "__", "-"])
_component = st.builds(
    lambda first, rest: first + "".join(rest),
    _alnum,
    st.lists(st.builds(lambda s, a: s + a, _separator, _alnum), max_size=2),
)
_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?", fullmatch=True)
_registry = st.one_of(
    st.none(),
    st.lists(_label, min_size=2, max_size=3).map(".".join),
    st.builds(lambda p: f"localhost:{p}", st.integers(1, 65535)),
    st.sampled_from(["docker.io", "index.docker.io", HUB, "[::1]:5000", "127.0.0.1:5443"]),
)
_tag = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,30}", fullmatch=True)


@st.composite
def tag_references(draw: st.DrawFn) -> str:
    registry = draw(_registry)
    path = "/".join(draw(st.lists(_component, min_size=1, max_size=3)))
    if registry is None and "/" in path and "." in path.split("/")[0]:
        registry = "docker.io"  # a first component with '.' reads as a host
    prefix = f"{registry}/" if registry else ""
    return f"{prefix}{path}:{draw(_tag)}"


@given(tag_references())
def test_a_tag_reference_round_trips_and_its_pin_is_the_import_reference(text: str) -> None:
    reference = parse_tag_reference(text)
    assert str(reference) == text
    pinned = reference.pinned(DIGEST)
    assert pinned == parse_reference(f"{text}@{DIGEST}")
    assert str(pinned) == f"{text}@{DIGEST}"
    assert (pinned.registry, pinned.repository, pinned.tag) == (
        reference.registry,
        reference.repository,
        reference.tag,
    )
    assert pinned.enroot_registry == reference.enroot_registry
    assert pinned.enroot_repository == reference.enroot_repository


@given(tag_references())
def test_a_tag_reference_with_a_digest_is_refused_naming_the_rule(text: str) -> None:
    with pytest.raises(InvalidReference) as caught:
        parse_tag_reference(f"{text}@{DIGEST}")
    assert caught.value.field == "source"
    assert "no digest" in caught.value.rule


@given(tag_references())
def test_a_reference_without_a_tag_is_refused_naming_the_rule(text: str) -> None:
    untagged = text.rsplit(":", 1)[0]
    with pytest.raises(InvalidReference) as caught:
        parse_tag_reference(untagged)
    assert "a tag is required" in caught.value.rule


FORBIDDEN = " \t\n\x00\x7f;$`|&'\"<>(){}*!~\\%+=,^?#é"


@given(
    tag_references(),
    st.integers(min_value=0, max_value=200),
    st.text(alphabet=FORBIDDEN, min_size=1, max_size=2),
)
def test_a_tag_reference_with_a_forbidden_character_never_parses(
    text: str, position: int, inserted: str
) -> None:
    position %= len(text) + 1
    with pytest.raises(InvalidReference):
        parse_tag_reference(text[:position] + inserted + text[position:])


@given(st.text(max_size=80))
def test_the_tag_parser_raises_nothing_but_invalid_reference(text: str) -> None:
    try:
        reference = parse_tag_reference(text)
    except InvalidReference as error:
        assert error.field == "source"
    else:
        assert parse_tag_reference(str(reference)) == reference


@pytest.mark.parametrize(
    ("text", "registry", "repository"),
    [
        ("ubuntu:24.04", HUB, "library/ubuntu"),
        ("vllm/vllm-openai:v0.6.3", HUB, "vllm/vllm-openai"),
        ("docker.io/library/python:3.11-slim", HUB, "library/python"),
        ("nvcr.io/nvidia/pytorch:25.01-py3", "nvcr.io", "nvidia/pytorch"),
        ("localhost:5000/slurm-image-test/multi:1", "localhost:5000", "slurm-image-test/multi"),
    ],
)
def test_docker_hub_short_names_are_asked_of_docker_hub_as_docker_does(
    text: str, registry: str, repository: str
) -> None:
    reference = parse_tag_reference(text)
    assert (reference.enroot_registry, reference.enroot_repository) == (registry, repository)


@pytest.mark.parametrize(
    ("text", "rule_word"),
    [
        ("Ubuntu:24.04", "lowercase"),
        ("alice:secret@ghcr.io/org/app:1", "credentials"),
        ("docker://ubuntu:24.04", "scheme"),
        ("ghcr.io/org/app:", "tag must match"),
        ("ghcr.io/org//app:1", "empty components"),
        ("", "empty"),
    ],
)
def test_a_bad_tag_reference_is_refused_naming_the_rule(text: str, rule_word: str) -> None:
    with pytest.raises(InvalidReference) as caught:
        parse_tag_reference(text)
    assert rule_word in caught.value.rule
    assert "secret" not in str(caught.value)


def test_an_import_reference_without_a_digest_points_at_resolve() -> None:
    with pytest.raises(InvalidReference) as caught:
        parse_reference("nvcr.io/nvidia/pytorch:25.01-py3")
    assert "--resolve" in caught.value.rule
