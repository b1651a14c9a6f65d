"""The catalog's pages as HTML (docs/gateway.md, "The catalog page"): one Jinja2 environment
over the templates shipped beside this module, autoescaping every template, and the page's own
stylesheet and scripts (package data too, read once). The gateway serves what this renders;
``catalog --html`` writes it to files (``pages.export``).

Every value a page shows came from a record, and much of it from inside an untrusted image: the
templates never mark data safe, and the scripts put text into the page with ``textContent`` only.
``CONTENT_SECURITY_POLICY`` lets a page load nothing but its own files, and run no inline script
or style.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

TEMPLATES = "templates"
STATIC = "static"
ASSET_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self';"
    " connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'"
)
"""The pages' policy: their own files only, no inline script or style, no plugin, no form."""
SERVED_POLICY = CONTENT_SECURITY_POLICY + "; frame-ancestors 'none'"
"""The policy the gateway sends as a header (``frame-ancestors`` is not read from a meta tag)."""


def _read_assets() -> dict[str, bytes]:
    folder = resources.files(__package__ or __name__).joinpath(STATIC)
    return {
        entry.name: entry.read_bytes()
        for entry in folder.iterdir()
        if any(entry.name.endswith(suffix) for suffix in ASSET_TYPES)
    }


ASSETS = _read_assets()
"""The stylesheet, scripts and icon the pages link, by file name."""


def asset_type(name: str) -> str:
    return next(kind for suffix, kind in ASSET_TYPES.items() if name.endswith(suffix))


_environment = Environment(
    loader=PackageLoader(__package__ or __name__, TEMPLATES),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


@dataclass(frozen=True)
class Site:
    """How a page links the others: served by the gateway (``/aliases/NAME``), or written as
    files (``aliases/NAME.html``, opened from ``file://`` or any web server). Links are
    relative either way: ``root`` is the way from the page back to the catalog's own folder."""

    static: bool

    def home(self, root: str) -> str:
        return f"{root}index.html" if self.static else root or "./"

    def alias(self, name: str, root: str) -> str:
        return f"{root}aliases/{name}{'.html' if self.static else ''}"

    def asset(self, name: str, root: str) -> str:
        return f"{root}{STATIC}/{name}"

    def requests(self, root: str) -> str | None:
        """The live page of lifecycles in flight: only where a gateway serves it."""
        return None if self.static else f"{root}requests"


def render(template: str, *, site: Site, root: str, **context: Any) -> str:
    """The page ``template`` for ``site``, ``root`` being its way back to the catalog."""
    return _environment.get_template(template).render(
        site=site, root=root, csp=CONTENT_SECURITY_POLICY, **context
    )


def template_names() -> list[str]:
    """Every template shipped (for the checks that each is autoescaped)."""
    return _environment.list_templates()
