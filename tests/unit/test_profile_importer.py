"""image_build.importer: Enroot's import by default, or the stream importer, nothing else."""

import pytest

from slurm_image.domain.errors import InvalidProfile
from slurm_image.domain.profile import parse_profile


def _profile(**importer: object) -> dict[str, object]:
    return {
        "workspace_root": "/srv/ws",
        "image_build": {
            "partition": "build",
            "cpus_per_task": 1,
            "memory": "1G",
            "time_limit": "1:00:00",
            **importer,
        },
    }


def test_enroot_imports_when_the_profile_names_no_importer() -> None:
    build = parse_profile(_profile()).image_build
    assert (build.importer, build.importer_name) == (None, "enroot")
    assert "importer" not in build.model_dump()


@pytest.mark.parametrize("name", ["enroot", "stream"])
def test_the_profile_names_its_importer(name: str) -> None:
    assert parse_profile(_profile(importer=name)).image_build.importer_name == name


@pytest.mark.parametrize("value", ["", "Stream", "tar2sqfs", "enroot ", 1, True, ["stream"]])
def test_the_profile_refuses_an_importer_it_does_not_know(value: object) -> None:
    with pytest.raises(InvalidProfile) as caught:
        parse_profile(_profile(importer=value))
    assert caught.value.field == "image_build.importer"
