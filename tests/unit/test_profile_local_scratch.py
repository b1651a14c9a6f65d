"""image_build.local_scratch: a mountable absolute path, accepted as such."""

import pytest

from slurm_image.domain.errors import InvalidProfile
from slurm_image.domain.profile import parse_profile


def _profile(scratch: str) -> dict[str, object]:
    return {
        "workspace_root": "/srv/ws",
        "image_build": {
            "partition": "build",
            "cpus_per_task": 1,
            "memory": "1G",
            "time_limit": "1:00:00",
            "local_scratch": scratch,
        },
    }


def test_profile_accepts_an_absolute_local_scratch() -> None:
    assert parse_profile(_profile("/local/scratch")).image_build.local_scratch == "/local/scratch"


@pytest.mark.parametrize("scratch", ["relative", "/a b", "/a:b", "/a,b", "/a/../b", "/a/"])
def test_profile_refuses_an_unusable_local_scratch(scratch: str) -> None:
    with pytest.raises(InvalidProfile) as caught:
        parse_profile(_profile(scratch))
    assert caught.value.field == "image_build.local_scratch"
