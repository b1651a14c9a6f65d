"""The batch job's shell text, one file per step beside this module (package data).

The files are part of the package as the modules are, fixed when it is built; they are read once,
when this module is imported, so the renderers stay functions of their plan alone. A step is
picked by its file name; a name that is not here is a ``ValueError``.
"""

from __future__ import annotations

from importlib import resources

SUFFIX = ".sh"


def _read_all() -> dict[str, str]:
    folder = resources.files(__name__)
    return {
        entry.name.removesuffix(SUFFIX): entry.read_text(encoding="utf-8")
        for entry in folder.iterdir()
        if entry.name.endswith(SUFFIX)
    }


_STEPS = _read_all()


def names() -> frozenset[str]:
    """Every step shipped, by name (the file name without ``.sh``)."""
    return frozenset(_STEPS)


def step(name: str) -> str:
    """The text of step ``name`` (``"04-scratch"`` is ``04-scratch.sh``)."""
    try:
        return _STEPS[name]
    except KeyError:
        raise ValueError(f"no job step named {name!r} in {__name__}") from None


def steps(*names: str) -> str:
    """The text of the steps ``names``, in that order."""
    return "".join(step(name) for name in names)
