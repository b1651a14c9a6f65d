"""Sites add submitters through the entry-point group ``slurm_image.submitters``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib.metadata import EntryPoint
from typing import Any

import pytest

import slurm_image.composition.container as container_module
from slurm_image.adapters.memory import FakeSubmitter
from slurm_image.adapters.sbatch import SbatchSubmitter
from slurm_image.composition.container import SUBMITTER_GROUP, build_container, require_submitter
from slurm_image.domain.errors import InvalidProfile
from slurm_image.domain.profile import parse_profile

GIVEN: list[Mapping[str, Any]] = []


class SiteSubmitter(FakeSubmitter):
    name = "mysite"


def make(settings: Mapping[str, Any]) -> SiteSubmitter:
    GIVEN.append(settings)
    return SiteSubmitter()


def make_nothing(settings: Mapping[str, Any]) -> object:
    return object()


def _profile(kind: str, **tables: Any) -> Any:
    return parse_profile(
        {
            "workspace_root": "/srv/ws",
            "image_build": {
                "partition": "cpu",
                "cpus_per_task": 1,
                "memory": "1G",
                "time_limit": "1:00:00",
            },
            "submitter": {"kind": kind, **tables},
        }
    )


@pytest.fixture
def site_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    points = [
        EntryPoint("mysite", f"{__name__}:make", SUBMITTER_GROUP),
        EntryPoint("broken", f"{__name__}:make_nothing", SUBMITTER_GROUP),
        EntryPoint("sbatch", f"{__name__}:make", SUBMITTER_GROUP),
    ]

    def entry_points(*, group: str) -> Sequence[EntryPoint]:
        return points if group == SUBMITTER_GROUP else []

    monkeypatch.setattr(container_module, "entry_points", entry_points)
    GIVEN.clear()


def test_a_registered_site_submitter_is_selected_with_its_settings_table(
    site_entry_points: None,
) -> None:
    profile = _profile("mysite", mysite={"endpoint": "https://scheduler.example.org"})
    container = build_container(profile)
    require_submitter(container, profile)
    submitter = container.submitter()
    assert isinstance(submitter, SiteSubmitter)
    assert GIVEN == [{"endpoint": "https://scheduler.example.org"}]


def test_a_site_cannot_replace_a_built_in_submitter(site_entry_points: None) -> None:
    container = build_container(_profile("sbatch"))
    assert isinstance(container.submitter(), SbatchSubmitter)
    assert GIVEN == []


def test_a_factory_that_gives_no_submitter_is_refused(site_entry_points: None) -> None:
    container = build_container(_profile("broken"))
    with pytest.raises(InvalidProfile) as refused:
        container.submitter()
    assert refused.value.field == "submitter.kind"


def test_an_unregistered_kind_is_refused_before_anything_happens(site_entry_points: None) -> None:
    profile = _profile("elsewhere")
    with pytest.raises(InvalidProfile, match="elsewhere"):
        require_submitter(build_container(profile), profile)


def test_only_the_selected_kind_may_have_a_settings_table() -> None:
    with pytest.raises(InvalidProfile) as refused:
        _profile("sbatch", mysite={"endpoint": "x"})
    assert refused.value.field == "submitter"


@pytest.mark.parametrize(
    ("rest", "rule"),
    [
        ({"url": "http://127.0.0.1:6820", "token_file": "/t"}, "user"),
        ({"url": "http://127.0.0.1:6820", "user": "alice"}, "token_file and token_env"),
        (
            {"url": "http://127.0.0.1:6820", "user": "alice", "token_file": "/t", "token_env": "T"},
            "token_file and token_env",
        ),
    ],
)
def test_rest_over_tcp_needs_a_user_and_one_token_source(rest: dict[str, str], rule: str) -> None:
    with pytest.raises(InvalidProfile, match=rule):
        _profile("rest", rest=rest)


def test_rest_over_a_unix_socket_needs_no_credentials() -> None:
    profile = _profile("rest", rest={"url": "unix:///run/slurmrestd.sock"})
    assert profile.submitter.rest.user is None
