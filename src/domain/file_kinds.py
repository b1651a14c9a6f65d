"""The kinds of directory entry the workspace and the store tell apart, and the words every
error uses for them. Standard library only: the catalog's read path uses it too."""

from __future__ import annotations

import stat
from typing import Literal

EntryKind = Literal["file", "directory", "symlink", "fifo", "other"]

# "other" is any entry the product never uses; its words say which when the mode tells.
WORDS: dict[str, str] = {
    "file": "a regular file",
    "directory": "a directory",
    "symlink": "a symlink",
    "fifo": "a FIFO",
    "socket": "a socket",
    "device": "a device",
    "other": "not a regular file",
}


def entry_kind(mode: int) -> EntryKind:
    """The kind of the entry whose ``st_mode`` is ``mode``."""
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "fifo"
    return "other"


def describe_mode(mode: int) -> str:
    """The words for the entry whose ``st_mode`` is ``mode``, e.g. "a FIFO"."""
    kind = entry_kind(mode)
    if kind == "other":
        if stat.S_ISSOCK(mode):
            return WORDS["socket"]
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            return WORDS["device"]
    return WORDS[kind]
