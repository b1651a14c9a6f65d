"""The rules that keep each local cluster's tests on one xdist worker (tests/parallel.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from parallel import check_cluster_ids, cluster_in_id, cluster_of, clusters_first, ordinary_uid


def item(
    params: dict[str, Any] | None = None,
    fixtures: tuple[str, ...] = (),
    nodeid: str = "tests/t.py::test_x",
    slurm: bool = True,
) -> Any:
    callspec = None if params is None else SimpleNamespace(params=params)
    marker = SimpleNamespace(name="slurm") if slurm else None
    return SimpleNamespace(
        callspec=callspec,
        fixturenames=fixtures,
        nodeid=nodeid,
        get_closest_marker=lambda name: marker if name == "slurm" else None,
    )


@pytest.mark.parametrize(
    ("params", "fixtures", "series"),
    [
        ({"local_slurm": "24.11"}, ("local_slurm",), "24.11"),
        ({"served": ("26.05", "v0.0.44")}, ("served",), "26.05"),
        ({"request": ["x", ("22.05",)]}, (), "22.05"),
        (None, ("local_slurm",), "22.05"),
        ({"kind": "sbatch"}, ("tmp_path",), None),
        ({"version": "22.06"}, (), None),
        (None, (), None),
    ],
)
def test_a_test_belongs_to_the_cluster_its_parameters_or_fixture_name(
    params: dict[str, Any] | None, fixtures: tuple[str, ...], series: str | None
) -> None:
    assert cluster_of(item(params, fixtures)) == series


@pytest.mark.parametrize(
    ("nodeid", "series"),
    [
        ("t.py::test_a[slurm-22.05]", "22.05"),
        ("t.py::C::test_a[slurm-26.05-rest-tcp]", "26.05"),
        ("t.py::test_a[x-slurm-24.11-v0.0.41]", "24.11"),
        ("t.py::test_a[slurm-22.06]", None),
        ("t.py::test_a[noslurm-22.05x]", None),
        ("t.py::test_slurm-22.05", None),
        ("t.py::test_a", None),
    ],
)
def test_the_scheduler_reads_the_cluster_from_the_parameter_id(
    nodeid: str, series: str | None
) -> None:
    assert cluster_in_id(nodeid) == series


def test_a_cluster_test_whose_id_does_not_name_its_cluster_is_refused() -> None:
    named = item({"c": "24.11"}, nodeid="t.py::test_a[slurm-24.11]")
    unmarked = item(None, ("local_slurm",), nodeid="t.py::test_b", slurm=False)
    check_cluster_ids([named, unmarked])
    with pytest.raises(pytest.UsageError, match=r"test_c runs on the Slurm 22\.05 cluster"):
        check_cluster_ids([named, item(None, ("local_slurm",), nodeid="t.py::test_c")])
    with pytest.raises(pytest.UsageError, match=r"must name slurm-26\.05"):
        check_cluster_ids([item({"c": "26.05"}, nodeid="t.py::test_d[slurm-22.05]")])


def test_the_tests_of_clusters_come_first_in_their_order() -> None:
    plain = item(nodeid="t.py::test_a")
    first = item(nodeid="t.py::test_b[slurm-26.05]")
    second = item(nodeid="t.py::test_c[slurm-22.05-sbatch]")
    items = [plain, first, second]
    clusters_first(items)  # type: ignore[arg-type]
    assert items == [first, second, plain]


def test_each_worker_has_an_ordinary_uid_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert ordinary_uid() == 4242
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    assert ordinary_uid() == 4245
