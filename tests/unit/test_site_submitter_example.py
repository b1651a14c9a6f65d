"""docs/site-submitter.md shows the example site submitter whole, as examples/site-submitter/
holds it (tests/packaging/test_wheel.py installs that package and runs the contract on it)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "site-submitter"
DOC = ROOT / "docs" / "site-submitter.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def test_the_doc_shows_the_submitter_and_its_test_as_the_example_holds_them() -> None:
    blocks = _blocks("python")
    assert (EXAMPLE / "spool_submitter" / "__init__.py").read_text() in blocks
    assert (EXAMPLE / "tests" / "test_spool_contract.py").read_text() in blocks


def test_the_example_submitter_is_under_80_lines() -> None:
    lines = (EXAMPLE / "spool_submitter" / "__init__.py").read_text().splitlines()
    assert len(lines) < 80
    assert re.search(rf"\b{len(lines)}\s+lines\b", DOC.read_text())


def test_the_example_registers_the_factory_the_doc_names() -> None:
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["slurm_image.submitters"] == {
        "spool": "spool_submitter:make_submitter"
    }
    assert 'spool = "spool_submitter:make_submitter"' in DOC.read_text()


def test_the_example_imports_only_what_a_site_may() -> None:
    allowed = ("slurm_image.submitters", "slurm_image.ports", "slurm_image.domain")
    source = (EXAMPLE / "spool_submitter" / "__init__.py").read_text()
    imported = re.findall(r"^from (slurm_image\S*) import", source, flags=re.MULTILINE)
    assert imported
    assert all(name.startswith(allowed) for name in imported), imported
