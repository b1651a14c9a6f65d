"""What the quick suite leaves to the full one (tests/suites.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from suites import QUICK_CLUSTER, in_quick_suite, select_suite


def item(nodeid: str, *marks: str) -> Any:
    return SimpleNamespace(
        nodeid=nodeid,
        get_closest_marker=lambda name: SimpleNamespace(name=name) if name in marks else None,
    )


def config(suite: str) -> Any:
    deselected: list[Any] = []
    hook = SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items))
    return SimpleNamespace(getoption=lambda name: suite, hook=hook, deselected=deselected)


def test_the_quick_suite_runs_one_cluster_and_every_test_of_none() -> None:
    assert QUICK_CLUSTER == "22.05"  # the cluster scripts/demo starts
    assert in_quick_suite(item("t.py::test_a"))
    assert in_quick_suite(item("t.py::test_a[slurm-22.05]"))
    assert in_quick_suite(item("t.py::C::test_a[slurm-22.05-rest-tcp]"))
    assert not in_quick_suite(item("t.py::test_a[slurm-24.11]"))
    assert not in_quick_suite(item("t.py::C::test_a[slurm-26.05-rest-unix]"))


def test_a_test_marked_full_only_is_left_to_the_full_suite() -> None:
    assert not in_quick_suite(item("t.py::test_a", "full_only"))
    assert not in_quick_suite(item("t.py::test_a[slurm-22.05]", "full_only"))
    assert in_quick_suite(item("t.py::test_a", "slurm"))


def test_the_quick_suite_deselects_and_says_so_the_full_suite_keeps_all() -> None:
    every = [
        item("t.py::test_a"),
        item("t.py::test_b[slurm-24.11]"),
        item("t.py::test_c", "full_only"),
        item("t.py::test_d[slurm-22.05]"),
    ]
    quick, full = config("quick"), config("full")
    items = list(every)
    select_suite(quick, items)
    assert [i.nodeid for i in items] == ["t.py::test_a", "t.py::test_d[slurm-22.05]"]
    assert [i.nodeid for i in quick.deselected] == ["t.py::test_b[slurm-24.11]", "t.py::test_c"]
    items = list(every)
    select_suite(full, items)
    assert items == every and full.deselected == []


def test_every_file_holding_a_full_only_test_is_named_in_docs_testing() -> None:
    tests = Path(__file__).resolve().parents[1]
    docs = (tests.parent / "docs" / "testing.md").read_text()
    section = docs[docs.index("## What the quick suite leaves to CI") :]
    section = section[: section.index("\n## ", 1)]
    holding = sorted(
        path.relative_to(tests.parent).as_posix()
        for path in tests.rglob("test_*.py")
        if "mark.full_only" in path.read_text() and path.name != "test_suites.py"
    )
    assert len(holding) >= 15
    assert [name for name in holding if f"`{name}`" not in section] == []
