"""``slurm-image catalog --html DIR``: the catalog's pages as files, for a site that publishes
them on a web server of its own (docs/cli.md, "catalog --html DIR"). The same templates as the
gateway's pages, with relative links (``index.html``, ``aliases/NAME.html``, ``static/``), so the
folder opens from ``file://`` as well as from any server; the policy is a meta tag.

What is written is what ``reading`` answers (the command line reads the store as anyone may
see it: ``Lifecycles.for_anyone``). ``DIR`` is the export's own: every file is written whole
(a temporary file renamed over it), and an alias page of an alias no longer published is
removed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from slurm_image.domain.history import HistoryEvent, HistoryRead
from slurm_image.domain.paths import NAME_PATTERN
from slurm_image.domain.published import PublishedAlias
from slurm_image.gateway.pages import render, views

ALIASES = "aliases"
INDEX = "index.html"
PAGE_SUFFIX = ".html"
SITE = render.Site(static=True)


class CatalogSource(Protocol):
    """What the export reads: the local use cases' ``Reading`` or a gateway's client."""

    def catalog_list(self) -> list[PublishedAlias]: ...

    def history(self, name: str | None = None, *, since: datetime | None = None) -> HistoryRead: ...


@dataclass(frozen=True)
class Exported:
    directory: str
    pages: list[str]
    removed: list[str]


def export(reading: CatalogSource, directory: str, machine: str | None) -> Exported:
    """Write the catalog page, one page per alias and the assets into ``directory``."""
    entries = reading.catalog_list()
    events = reading.history().events
    by_name: dict[str, list[PublishedAlias]] = {}
    for published in entries:
        by_name.setdefault(str(published.record.get("name")), []).append(published)
    root = Path(directory)
    (root / ALIASES).mkdir(parents=True, exist_ok=True)
    (root / render.STATIC).mkdir(exist_ok=True)
    for name, data in render.ASSETS.items():
        _write(root / render.STATIC / name, data)
    rows = views.catalog_rows(entries, machine)
    html = render.render("catalog.html", site=SITE, root="", rows=rows, machine=machine)
    _write(root / INDEX, html.encode())
    pages = [INDEX]
    for name, of_alias in sorted(by_name.items()):
        page = views.alias_page(name, of_alias, _of(events, name), machine)
        html = render.render("alias.html", site=SITE, root="../", page=page)
        relative = f"{ALIASES}/{name}{PAGE_SUFFIX}"
        _write(root / relative, html.encode())
        pages.append(relative)
    removed = _remove_stale(root / ALIASES, set(by_name))
    return Exported(str(root), pages, removed)


def _of(events: Sequence[HistoryEvent], name: str) -> list[HistoryEvent]:
    return [event for event in events if event.alias == name]


def _write(path: Path, data: bytes) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        Path(temporary).chmod(0o644)
        Path(temporary).replace(path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _remove_stale(folder: Path, names: set[str]) -> list[str]:
    """Remove the page of every alias no longer published (only files named as alias pages)."""
    removed = []
    for path in sorted(folder.iterdir()):
        stem = path.name.removesuffix(PAGE_SUFFIX)
        if (
            path.name.endswith(PAGE_SUFFIX)
            and NAME_PATTERN.fullmatch(stem)
            and stem not in names
            and path.is_file()
            and not path.is_symlink()
        ):
            path.unlink()
            removed.append(f"{ALIASES}/{path.name}")
    return removed
