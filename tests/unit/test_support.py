"""The test suite's own rule: under ``CI=true`` a missing prerequisite fails, never skips."""

from __future__ import annotations

import pytest

from support import unavailable


def test_a_missing_prerequisite_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="required when CI=true"):
        unavailable("unshare is not permitted here")


def test_a_missing_prerequisite_skips_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        unavailable("unshare is not permitted here")
