"""architecture.md is the map a newcomer reads in ten minutes: it stays within 300 lines, and
every page and anchor it links to exists, as does every one that README and the docs/ pages
holding its details link to. Anchors are GitHub's: a heading's text lowercased, punctuation
dropped, spaces as hyphens; or an explicit ``<a id="...">``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "architecture.md"
MAP_LINES_MAX = 300

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
_EXPLICIT = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")


def _prose(path: Path) -> str:
    """The file's text without its fenced code blocks (a ``#`` in a shell example is no
    heading, a ``[x](y)`` in one no link)."""
    return _FENCE.sub("", path.read_text(encoding="utf-8"))


def slug(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = _prose(path)
    found: set[str] = set(_EXPLICIT.findall(text))
    seen: dict[str, int] = {}
    for heading in _HEADING.findall(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(path: Path) -> list[str]:
    """The relative links of ``path`` whose file or anchor does not exist, each as ``target
    (why)``."""
    problems = []
    for target in _LINK.findall(_prose(path)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto:
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path.resolve()
        if not linked.exists():
            problems.append(f"{target} (no such file)")
        elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked)):
            problems.append(f"{target} (no such anchor)")
    return problems


def test_the_map_stays_short() -> None:
    lines = MAP.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAP_LINES_MAX, (
        f"architecture.md has {len(lines)} lines, more than {MAP_LINES_MAX}: move the detail"
        " into the docs/ page it belongs to and link it"
    )


def test_every_page_and_anchor_the_map_links_exists() -> None:
    assert broken_links(MAP) == []


@pytest.mark.parametrize(
    "page", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name
)
def test_every_page_and_anchor_the_pages_it_leads_to_link_exists(page: Path) -> None:
    """The details moved from the map into docs/: their links, to the map's anchors too."""
    assert broken_links(page) == []


def test_a_missing_page_or_anchor_is_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "ports.md").write_text(
        "# Ports\n\n```sh\n# not a heading\n```\n\n## What Slurm's `squeue` prints\n"
    )
    page = tmp_path / "map.md"
    page.write_text(
        "[ok](docs/ports.md#what-slurms-squeue-prints) [gone](docs/gone.md)"
        " [code](docs/ports.md#not-a-heading) [web](https://example.org/x#y)\n"
    )
    assert broken_links(page) == [
        "docs/gone.md (no such file)",
        "docs/ports.md#not-a-heading (no such anchor)",
    ]
