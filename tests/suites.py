"""The two suites of scripts/test: the quick one a developer runs (the README's command on a
machine without ``CI=true``), and the full one CI runs (``scripts/test --full``, or ``CI=true``).

The quick suite is the full one less two things, deselected at collection (pytest counts them as
deselected, never as skipped): the tests of the local clusters other than ``QUICK_CLUSTER`` (the
one ``scripts/demo`` starts; their behaviour does not depend on the scheduler's version, or is
checked on it too), and the tests marked ``full_only``, each a long test whose rule a quicker
test of the quick suite also reaches. docs/testing.md lists what the quick suite leaves to CI.
"""

from __future__ import annotations

import pytest

from parallel import cluster_in_id

QUICK_CLUSTER = "22.05"
SUITES = ("full", "quick")


def add_suite_option(parser: pytest.Parser) -> None:
    parser.addoption(
        "--suite",
        choices=SUITES,
        default="full",
        help="quick: leave the other clusters' tests and those marked full_only to the full "
        "suite (default: full)",
    )


def in_quick_suite(item: pytest.Item) -> bool:
    """Whether the quick suite runs ``item``."""
    if item.get_closest_marker("full_only") is not None:
        return False
    series = cluster_in_id(item.nodeid)
    return series is None or series == QUICK_CLUSTER


def select_suite(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect what the chosen suite does not run."""
    if config.getoption("suite") != "quick":
        return
    kept = [item for item in items if in_quick_suite(item)]
    if len(kept) == len(items):
        return
    kept_ids = {id(item) for item in kept}
    config.hook.pytest_deselected(items=[item for item in items if id(item) not in kept_ids])
    items[:] = kept
