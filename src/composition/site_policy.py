"""The site policy file (docs/design.md, "The site policy"): ``/etc/slurm-image/policy.toml``,
one ``[policy]`` table that the profile's ``[policy]``, another ``--profile`` and the
``SLURM_IMAGE_POLICY__*`` overrides cannot weaken (``domain.policy.strictest``).

Read like the profile, with ``os`` calls, but only from a file root alone can change: the walk
from ``/`` opens each directory without following a symlink and holds it to
``paths.shared_directory_problem`` for root (owned by root; sticky where group or others may
write, so that nobody else can rename what is in it), and the file to
``paths.unchangeable_file_problem`` for root (a regular file of root's that group and others
cannot write). Anything else is refused, exit 2: a policy that another user could rewrite or
swap would let them choose it. No file (or no directory on the way) is no site policy.

The path is compiled in: no variable or option names another one, since a user could name a
file of their own and so switch the policy off. ``read_site_policy(path)`` takes another path
for the tests.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tomllib
from collections.abc import Callable
from typing import TYPE_CHECKING

from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidProfile

if TYPE_CHECKING:
    from slurm_image.domain.profile import SitePolicy

SITE_POLICY_PATH = "/etc/slurm-image/policy.toml"
SITE_POLICY_MAX_BYTES = 1 << 20
ROOT_UID = 0
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_ROOT_ALONE = "the site policy and every directory on its way must be changeable by root alone"


def read_site_policy(path: str | None = None) -> SitePolicy | None:
    """The site policy at ``path`` (default ``SITE_POLICY_PATH``), None when there is none.
    Raises ``InvalidProfile`` naming the file: one that anyone but root could change, that
    cannot be read, or that is no valid site policy."""
    from slurm_image.domain.profile import parse_site_policy

    path = SITE_POLICY_PATH if path is None else path
    data = _read_root_file(path)
    if data is None:
        return None
    if len(data) > SITE_POLICY_MAX_BYTES:
        raise _refused(path, f"must be at most {SITE_POLICY_MAX_BYTES} bytes")
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise _refused(path, f"is not valid TOML: {error}") from None
    except (RecursionError, ValueError) as error:  # valid TOML that Python cannot hold
        raise _refused(path, f"cannot be read: {type(error).__name__}") from None
    return parse_site_policy(document, path=path, sha256=hashlib.sha256(data).hexdigest())


def _refused(path: str, rule: str) -> InvalidProfile:
    return InvalidProfile(field=path, rule=rule, value=path)


def _read_root_file(path: str) -> bytes | None:
    """The bytes of ``path`` read through a walk that follows no symlink, each directory and
    the file held to root's rules; None when it or a directory on its way does not exist."""
    if path != os.path.normpath(path) or not path.startswith("/") or path == "/":
        raise _refused(path, "must be an absolute, normalised path of a file")
    root, *directories, _ = paths.ancestors(path)
    fd = os.open(root, _DIRECTORY_FLAGS)
    try:
        _hold(path, root, os.fstat(fd), paths.shared_directory_problem)
        for where in directories:
            child = _open(path, where, fd, _DIRECTORY_FLAGS)
            if child is None:
                return None
            os.close(fd)
            fd = child
            _hold(path, where, os.fstat(fd), paths.shared_directory_problem)
        file_fd = _open(path, path, fd, _FILE_FLAGS)
        if file_fd is None:
            return None
        try:
            _hold(path, path, os.fstat(file_fd), paths.unchangeable_file_problem)
            with os.fdopen(file_fd, "rb", closefd=False) as handle:
                return handle.read(SITE_POLICY_MAX_BYTES + 1)
        finally:
            os.close(file_fd)
    except OSError as error:
        raise _refused(path, f"cannot be read: {error.strerror}") from None
    finally:
        os.close(fd)


def _open(path: str, where: str, parent: int, flags: int) -> int | None:
    """``where`` opened by its last name in the directory ``parent``; None when absent."""
    name = where.rsplit("/", 1)[1]
    try:
        return os.open(name, flags, dir_fd=parent)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR) and stat.S_ISLNK(
            os.lstat(name, dir_fd=parent).st_mode
        ):
            raise _refused(path, f"{where} is a symbolic link: {_ROOT_ALONE}") from None
        raise _refused(path, f"cannot read {where}: {error.strerror}") from None


def _hold(
    path: str, where: str, status: os.stat_result, rule: Callable[[int, int, int], str | None]
) -> None:
    problem = rule(status.st_mode, status.st_uid, ROOT_UID)
    if problem is not None:
        raise _refused(path, f"{where} {problem}: {_ROOT_ALONE}")
