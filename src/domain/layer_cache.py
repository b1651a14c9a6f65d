"""The private layer cache (README, "The layer cache"): Enroot's ``ENROOT_CACHE_PATH``, kept
between the import jobs of one user. Where it is, how large it may grow, which of its entries
are Enroot's blobs, and who may own it. Standard library only."""

from __future__ import annotations

import re
from dataclasses import dataclass

from slurm_image.domain import paths, sizes
from slurm_image.domain.errors import InvalidPath

DEFAULT_MAX = "100G"
"""The bound ``gc`` keeps the cache to when the profile names none."""
DIRECTORY_MODE = 0o700
DEFAULT_NAME = "layer-cache"
FIELD = "enroot.layer_cache"
MAX_FIELD = "enroot.layer_cache_max"

BLOB_NAME = re.compile(r"[0-9a-f]{64}")
"""A blob as Enroot stores it: named by its sha256 digest alone."""
TEMPORARY_NAME = re.compile(r"[0-9a-f]{64}\.[A-Za-z0-9]{10}")
"""A download in progress (docker::_download_extract: ``mktemp DIGEST.XXXXXXXXXX``)."""
TOKEN_DIRECTORY = re.compile(r"\.tokens\.[0-9]+")
"""Enroot's registry tokens of one uid (``.tokens.<uid>/<registry>.<pid>``)."""


def entry_parts(name: str) -> list[str] | None:
    """The parts of ``name`` if it can name an entry of the cache (a file in it, or one in its
    token directory), else None."""
    parts = name.split("/")
    if (
        len(parts) > 2
        or any(part in ("", ".", "..") for part in parts)
        or (len(parts) == 2 and not TOKEN_DIRECTORY.fullmatch(parts[0]))
    ):
        return None
    return parts


def size_bytes(value: str) -> int:
    """``layer_cache_max`` (the ``memory`` grammar, ``[1-9][0-9]*[KMGT]``) in bytes."""
    if not sizes.SIZE_PATTERN.fullmatch(value):
        raise ValueError("must match ^[1-9][0-9]*[KMGT]$ (e.g. 200G)")
    return sizes.size_bytes(value)


def default_path(workspace_root: str) -> str:
    return f"{paths.workspace_root(workspace_root)}/images/{DEFAULT_NAME}"


def cache_path(setting: str | bool | None, workspace_root: str, home: str | None) -> str | None:
    """The cache the job uses: None when ``setting`` is ``False`` (off); the default directory
    under the workspace when it is None; the path, with ``~`` as ``home``, otherwise."""
    if setting is False:
        return None
    if setting is None or setting is True:
        return default_path(workspace_root)
    if setting.startswith("~/"):
        if home is None:
            raise InvalidPath(
                field=FIELD, rule="starts with ~/ but the home directory is unknown", value=setting
            )
        expanded = home.rstrip("/") + setting[1:]
        return paths.layer_cache(expanded, FIELD)
    return paths.layer_cache(setting, FIELD)


@dataclass(frozen=True)
class CacheBound:
    """The layer cache as this machine reaches it: its directory, and the bytes its blobs may
    take (``gc`` keeps it to that; ``metrics`` reports both)."""

    path: str
    max_bytes: int


def cache_bound(
    setting: str | bool | None, max_bytes: int, workspace_root: str, home: str | None
) -> CacheBound | None:
    """The cache of ``setting`` (``cache_path``) with its bound; None when it is off."""
    path = cache_path(setting, workspace_root, home)
    return None if path is None else CacheBound(path, max_bytes)


def directory_problem(mode: int, owner: int, uid: int) -> str | None:
    """What lets another user change the cache directory itself, or ``None``: it must be the
    user's own, and not writable by group or others even with the sticky bit (anyone who may
    add an entry could plant a blob under a digest). Its parents are held to
    ``paths.shared_directory_problem``."""
    problem = paths.own_directory_problem(mode, owner, uid)
    if problem is None and mode & 0o022:
        return "is writable by group or others, who could plant a layer in it"
    return problem
