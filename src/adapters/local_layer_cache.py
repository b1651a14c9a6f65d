"""The layer cache on this host (``ports.workspace``: ``cache_problem``, ``cache_entries``,
``remove_cache_file``): walked by descriptors, never following a symlink below its path."""

from __future__ import annotations

import os
import stat

from slurm_image.domain import layer_cache, paths
from slurm_image.domain.file_kinds import describe_mode
from slurm_image.ports.workspace import (
    CacheEntry,
    NotFound,
    NotRegularFile,
    UnsafePath,
    WorkspaceError,
)

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def cache_problem(directory: str, uid: int) -> str | None:
    real = os.path.realpath(directory)
    for chain in (paths.ancestors(directory)[:-1], paths.ancestors(real)[:-1]):
        for path in chain:
            try:
                link = os.lstat(path)
                status = os.stat(path)  # noqa: PTH116 (one rule for every path here)
            except FileNotFoundError:
                return None  # the job creates the rest, 0700
            except OSError as error:
                return f"{path} cannot be examined: {error.strerror}"
            if stat.S_ISLNK(link.st_mode) and link.st_uid not in (uid, 0):
                return (
                    f"{path} is a symlink owned by uid {link.st_uid}, neither by uid {uid} nor"
                    " by root"
                )
            if not stat.S_ISDIR(status.st_mode):
                return f"{path} is {describe_mode(status.st_mode)}, not a directory"
            problem = paths.shared_directory_problem(status.st_mode, status.st_uid, uid)
            if problem is not None:
                return f"{path} {problem}"
    for path in dict.fromkeys((directory, real)):
        try:
            status = os.lstat(path)
        except FileNotFoundError:
            return None
        except OSError as error:
            return f"{path} cannot be examined: {error.strerror}"
        if not stat.S_ISDIR(status.st_mode):
            return f"{path} is {describe_mode(status.st_mode)}, not a directory"
        problem = layer_cache.directory_problem(status.st_mode, status.st_uid, uid)
        if problem is not None:
            return f"{path} {problem}"
    return None


def _open_cache(directory: str, uid: int) -> int:
    problem = cache_problem(directory, uid)
    if problem is not None:
        raise UnsafePath(field=directory, rule=problem)
    try:
        fd = os.open(directory, _DIRECTORY)
    except FileNotFoundError:
        raise NotFound(field=directory, rule="does not exist") from None
    except OSError as error:
        raise WorkspaceError(field=directory, rule=error.strerror or str(error)) from None
    status = os.fstat(fd)
    problem = layer_cache.directory_problem(status.st_mode, status.st_uid, uid)
    if problem is not None:  # exchanged since it was checked
        os.close(fd)
        raise UnsafePath(field=directory, rule=f"{directory} {problem}")
    return fd


def _entry(fd: int, name: str, shown: str) -> CacheEntry | None:
    try:
        status = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None  # removed by a peer meanwhile
    used = max(status.st_atime, status.st_mtime)
    return CacheEntry(shown, stat.S_ISREG(status.st_mode), status.st_size, used)


def cache_entries(directory: str, uid: int) -> list[CacheEntry]:
    fd = _open_cache(directory, uid)
    try:
        found: list[CacheEntry] = []
        for name in sorted(os.listdir(fd)):  # noqa: PTH208 (a descriptor, not a path)
            entry = _entry(fd, name, name)
            if entry is None:
                continue
            found.append(entry)
            if layer_cache.TOKEN_DIRECTORY.fullmatch(name):
                try:
                    tokens = os.open(name, _DIRECTORY, dir_fd=fd)
                except OSError:
                    continue  # a symlink or no directory: nothing below it is read
                try:
                    for inner in sorted(os.listdir(tokens)):  # noqa: PTH208
                        token = _entry(tokens, inner, f"{name}/{inner}")
                        if token is not None:
                            found.append(token)
                finally:
                    os.close(tokens)
        return found
    finally:
        os.close(fd)


def remove_cache_file(directory: str, name: str, uid: int) -> None:
    field = f"{directory}/{name}"
    parts = layer_cache.entry_parts(name)
    if parts is None:
        raise UnsafePath(field=field, rule="is no entry of the layer cache")
    fd = _open_cache(directory, uid)
    try:
        parent = fd
        if len(parts) == 2:
            try:
                parent = os.open(parts[0], _DIRECTORY, dir_fd=fd)
            except FileNotFoundError:
                raise NotFound(field=field, rule="does not exist") from None
            except OSError as error:
                raise UnsafePath(field=field, rule=f"{parts[0]}: {error.strerror}") from None
        try:
            try:
                status = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                raise NotFound(field=field, rule="does not exist") from None
            if not stat.S_ISREG(status.st_mode):
                raise NotRegularFile(
                    field=field, rule=f"is {describe_mode(status.st_mode)}, not a regular file"
                )
            try:
                os.unlink(parts[-1], dir_fd=parent)
            except FileNotFoundError:
                raise NotFound(field=field, rule="does not exist") from None
            except OSError as error:
                raise WorkspaceError(field=field, rule=error.strerror or str(error)) from None
        finally:
            if parent != fd:
                os.close(parent)
    finally:
        os.close(fd)
