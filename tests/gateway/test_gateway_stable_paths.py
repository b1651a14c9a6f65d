"""``path NAME`` through the gateway (tests/gateway_lab.py): the same stable path the store's own
reader answers, following a replace, a private alias's in its group's directory and for that
group alone, and the same refusals."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway_lab import PRIVATE_GROUP, SOURCE, GatewayLab, gateway_lab
from slurm_image.domain.credentials import RegistryCredentials
from slurm_image.wire.exit_codes import EXIT_INVALID
from slurm_image.wire.remote_error import RemoteError

OTHER_SOURCE = f"registry.example.org/team/other:2@sha256:{'e' * 64}"


@pytest.fixture
def lab() -> Iterator[GatewayLab]:
    with gateway_lab() as running:
        yield running


def _publish(lab: GatewayLab, user: str, source: str, sqsh: bytes, **options: object) -> None:
    client = lab.client(user)
    outcome = client.import_image(source, name="a", role="client", **options)  # type: ignore[arg-type]
    lab.run_job(outcome.lifecycle_id, sqsh=sqsh)
    client.wait([outcome.lifecycle_id], timeout_s=10)
    client.publish(outcome.lifecycle_id, replace=bool(options.get("replace")))


def test_path_through_the_gateway_is_the_stores_own_and_follows_a_replace(
    lab: GatewayLab,
) -> None:
    _publish(lab, "alice", SOURCE, b"one")
    remote = lab.client("bob").stable_path("a", arch="x86_64")
    local = lab.local().container.catalog_reader().stable_path("a", arch="x86_64")
    assert remote == local
    assert remote.path == f"{lab.layout.images}/by-name/x86_64/a.sqsh"
    assert Path(remote.path).read_bytes() == b"one"
    _publish(lab, "alice", OTHER_SOURCE, b"two", replace=True)
    replaced = lab.client("bob").stable_path("a", arch="x86_64")
    assert replaced.path == remote.path and replaced.pinned != remote.pinned
    assert Path(replaced.path).read_bytes() == b"two"
    assert Path(remote.pinned).read_bytes() == b"one"  # kept for the jobs that started with it


def test_a_private_alias_path_is_its_groups_alone(lab: GatewayLab) -> None:
    login = RegistryCredentials(host="registry.example.org", login="alice", password="pw-1")
    _publish(lab, "alice", SOURCE, b"one", group=PRIVATE_GROUP, credentials=login)
    found = lab.client("alice").stable_path("a", arch="x86_64")
    assert found.path == f"{lab.layout.images}/by-name/groups/{PRIVATE_GROUP}/x86_64/a.sqsh"
    directory = os.stat(Path(found.path).parent.parent)
    assert stat.S_IMODE(directory.st_mode) == 0o750 and directory.st_gid == 1
    assert Path(found.path).read_bytes() == b"one"
    with pytest.raises(RemoteError) as refused:
        lab.client("bob").stable_path("a", arch="x86_64")
    assert refused.value.exit_code == EXIT_INVALID
    assert refused.value.field == "name"


@pytest.mark.parametrize(
    ("name", "arch", "field"),
    [("missing", "x86_64", "name"), ("a", "sparc", "arch"), ("a", "aarch64", "arch")],
)
def test_an_unknown_alias_or_architecture_is_refused_as_the_local_reader_refuses_it(
    lab: GatewayLab, name: str, arch: str, field: str
) -> None:
    _publish(lab, "alice", SOURCE, b"one")
    before = sorted(str(path) for path in Path(lab.layout.images).rglob("*"))
    with pytest.raises(RemoteError) as refused:
        lab.client("bob").stable_path(name, arch=arch)
    assert (refused.value.field, refused.value.exit_code) == (field, EXIT_INVALID)
    assert sorted(str(path) for path in Path(lab.layout.images).rglob("*")) == before
