"""The rule that keeps each local cluster's tests on one xdist worker (tests/parallel.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from parallel import cluster_of, group_by_cluster, ordinary_uid


def item(params: dict[str, Any] | None = None, fixtures: tuple[str, ...] = ()) -> Any:
    callspec = None if params is None else SimpleNamespace(params=params)
    return SimpleNamespace(callspec=callspec, fixturenames=fixtures, markers=[])


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


def test_grouped_tests_come_first_each_marked_with_its_cluster(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain, first, second = item(), item({"c": "26.05"}), item(None, ("local_slurm",))
    for one in (plain, first, second):
        one.add_marker = one.markers.append
    items = [plain, first, second]
    group_by_cluster(items)  # type: ignore[arg-type]
    assert items == [first, second, plain]
    assert [m.kwargs.get("name") or m.args[0] for m in first.markers] == ["slurm-26.05"]
    assert [m.args[0] for m in second.markers] == ["slurm-22.05"]
    assert plain.markers == []


def test_each_worker_has_an_ordinary_uid_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert ordinary_uid() == 4242
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    assert ordinary_uid() == 4245
