"""Record facts about the Python environment of a container image, from inside the image.

Usage: python3 -I -B inspect_image.py ROLE SQSH_SHA256 OUTPUT_PATH

  ROLE         client | serving
  SQSH_SHA256  the sha256 of the image's .sqsh file, 64 lowercase hex (recorded, not checked)
  OUTPUT_PATH  absolute path of the JSON record to write; its directory must exist

Environment:
  SLURM_IMAGE_REQUIRE  client only: comma-separated distribution names the image must contain,
                       in addition to pip (which is always required). Set for serving: usage error.

Exit codes:
  0  the record was written
  2  usage error (bad arguments or environment); nothing written
  3  refused: the image does not satisfy the role (missing distribution, two copies of one in
     one directory, console script not found, unreadable metadata); nothing written
  4  the record could not be written; nothing left behind

The record is one JSON object (schema_version 3): role, sqsh_sha256, inspector_version, machine
(platform.machine(): the architecture the image's python3 runs as, natively or emulated) and
the facts of the role. When a distribution is installed more than once on sys.path (apt's pip in
/usr/lib/python3/dist-packages plus `pip install --upgrade pip` in /usr/local), the effective
copy is the one Python's import system finds first on sys.path, which is what `python3 -m pip`
and every `pip` script import: its facts are recorded, the others are listed under `shadowed`.
Each fact is taken from the effective distribution that owns it: a `pip` or `vllm` elsewhere on
PATH is never consulted. This file is both the program staged into the image and the module the
host imports; it must run on Python 3.8 and newer with the standard library only.
"""

from __future__ import annotations

import contextlib
import csv
import importlib.metadata
import io
import json
import os
import platform
import re
import sys
import sysconfig
import tempfile
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

INSPECTOR_VERSION = "3.0.0"
SCHEMA_VERSION = 3
ROLES = ("client", "serving")
REQUIRE_ENV = "SLURM_IMAGE_REQUIRE"

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_WRITE_FAILED = 4

_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
_PROJECT_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?\Z", re.ASCII)
_SITE_DIR = re.compile(r"(.*)/lib(?:64)?/python[^/]*/(?:site|dist)-packages\Z")
_SCRIPT_HEAD_BYTES = 64 * 1024


class UsageError(Exception):
    """The program was called wrongly."""


class Refused(Exception):
    """The image does not satisfy what its role requires."""


class Distribution:
    """One installed distribution as importlib.metadata found it, with its name and version."""

    def __init__(self, dist: importlib.metadata.Distribution, name: str, version: str) -> None:
        self.dist = dist
        self.name = name
        self.version = version
        self.rank = 0
        """Index of its directory on the search path: the lowest rank is imported."""

    @property
    def key(self) -> str:
        return normalize_name(self.name)

    @property
    def metadata_path(self) -> Optional[str]:
        path = getattr(self.dist, "_path", None)
        return None if path is None else os.path.realpath(str(path))

    @property
    def location(self) -> str:
        """The directory on sys.path that holds the metadata directory."""
        return os.path.normpath(os.path.abspath(str(self.dist.locate_file(""))))

    def describe(self) -> str:
        return "%s %s at %s" % (self.name, self.version, self.metadata_path or self.location)


class Installed:
    """The distributions on a search path: by normalized name the effective copy (the first on
    the path, the one the import system finds) and the copies it shadows, in path order."""

    def __init__(self, effective: Dict[str, Distribution], shadowed: Dict[str, List[Distribution]]):
        self.effective = effective
        self.shadowed = shadowed

    def __getitem__(self, key: str) -> Distribution:
        return self.effective[key]

    def describe(self, key: str) -> str:
        """The effective copy of ``key`` and every copy it shadows, for messages."""
        text = self.effective[key].describe()
        others = self.shadowed.get(key, [])
        if others:
            text += " (shadowing %s)" % "; ".join(d.describe() for d in others)
        return text

    def shadowed_facts(self) -> List[Dict[str, str]]:
        return [
            {"name": key, "version": dist.version, "location": dist.location}
            for key in sorted(self.shadowed)
            for dist in self.shadowed[key]
        ]


def normalize_name(name: str) -> str:
    """PEP 503 normalized form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _read_metadata(dist: importlib.metadata.Distribution) -> Tuple[Optional[str], Optional[str]]:
    # get_all, not []: a missing key through [] warns on 3.12+ and is meant to raise later
    metadata = dist.metadata
    names = metadata.get_all("Name") or [None]
    versions = metadata.get_all("Version") or [None]
    return names[0], versions[0]


def _path_rank(search: Sequence[str]) -> Dict[str, int]:
    """The first index of each search path directory, by its real path."""
    ranks: Dict[str, int] = {}
    for index, entry in enumerate(search):
        ranks.setdefault(os.path.realpath(entry or os.curdir), index)
    return ranks


def find_distributions(path: Optional[Sequence[str]] = None) -> Installed:
    """Every distribution on ``path`` (default sys.path), effective and shadowed copies.

    The effective copy of a name is the one in the earliest directory of the path. Raises
    Refused when that directory holds two copies of the name (the import system cannot order
    them) or a distribution has no name or version. The same metadata directory reached through
    two path entries counts once.
    """
    found: Dict[str, List[Distribution]] = {}
    seen = set()
    search = list(sys.path if path is None else path)
    ranks = _path_rank(search)
    for raw in importlib.metadata.distributions(path=search):
        name, version = _read_metadata(raw)
        if not name or not version:
            where = getattr(raw, "_path", "an unknown location")
            raise Refused(
                "unreadable distribution metadata (no name or version) at %s; the site can "
                "remove or repair that metadata directory in the image" % where
            )
        dist = Distribution(raw, name.strip(), version.strip())
        marker = dist.metadata_path or (dist.key, dist.version, dist.location)
        if marker in seen:
            continue
        seen.add(marker)
        dist.rank = ranks.get(os.path.realpath(dist.location), len(search))
        found.setdefault(dist.key, []).append(dist)
    effective: Dict[str, Distribution] = {}
    shadowed: Dict[str, List[Distribution]] = {}
    ambiguous = []
    for key, dists in sorted(found.items()):
        dists.sort(key=lambda d: d.rank)  # stable: path order, then the order found
        directory = os.path.realpath(dists[0].location)
        first = [d for d in dists if os.path.realpath(d.location) == directory]
        if len(first) > 1:
            others = [d for d in dists if d not in first]
            ambiguous.append(
                "%s is installed %d times in one directory, %s, so Python's import order "
                "cannot tell which is in use: %s%s"
                % (
                    key,
                    len(first),
                    first[0].location,
                    "; ".join(d.describe() for d in first),
                    "" if not others else " (also: %s)" % "; ".join(d.describe() for d in others),
                )
            )
            continue
        effective[key] = dists[0]
        if len(dists) > 1:
            shadowed[key] = dists[1:]
    if ambiguous:
        raise Refused(
            " | ".join(ambiguous) + ". The site can remove the stale metadata directory from the "
            "image, or reinstall the distribution so that one copy is left in that directory"
        )
    return Installed(effective, shadowed)


def _console_script_module(installed: Installed, key: str, script: str) -> str:
    dist = installed[key]
    values = set()
    for entry in dist.dist.entry_points:
        if entry.group == "console_scripts" and entry.name == script:
            values.add(entry.value)
    if len(values) != 1:
        problem = "declares no %r console script" if not values else "declares %r twice"
        raise Refused(
            "%s %s; the site can reinstall it from a genuine release (python3 -m pip install "
            "--force-reinstall --no-deps %s)"
            % (installed.describe(key), problem % script, dist.name)
        )
    # EntryPoint.module is 3.9+; the value is "module:attr [extras]"
    return values.pop().partition(":")[0].strip()


def _is_executable_file(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _recorded_scripts(dist: Distribution, script: str) -> List[str]:
    """Paths of ``script`` listed in the distribution's RECORD, outside its import location."""
    text = dist.dist.read_text("RECORD")
    if not text:
        return []
    location = dist.location
    paths = []
    for row in csv.reader(io.StringIO(text)):
        if not row or os.path.basename(row[0]) != script:
            continue
        path = os.path.normpath(os.path.join(location, row[0]))
        if not path.startswith(location + os.sep):
            paths.append(path)
    return paths


def _scripts_dirs(dist: Distribution) -> List[str]:
    """Where an installer without RECORD put the scripts for this distribution's location."""
    location = dist.location
    dirs = []
    match = _SITE_DIR.match(location)
    if match:
        # <prefix>/lib/pythonX.Y/site-packages (venv, conda, /usr/local), Debian's
        # <prefix>/lib/python3/dist-packages: scripts go to <prefix>/bin
        dirs.append(os.path.join(match.group(1) or "/", "bin"))
    for lib in ("purelib", "platlib"):
        if os.path.normpath(sysconfig.get_path(lib)) == location:
            dirs.append(os.path.normpath(sysconfig.get_path("scripts")))
    return list(dict.fromkeys(dirs))


def _script_names_distribution(path: str, dist: Distribution, script: str, module: str) -> bool:
    try:
        with open(path, "rb") as handle:
            head = handle.read(_SCRIPT_HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return False
    if re.search(r"(?m)^\s*(?:from|import)\s+%s\b" % re.escape(module), head):
        return True
    # setuptools' easy_install scripts: load_entry_point('pip==20.3.4', 'console_scripts', 'pip')
    pattern = r"""['"]%s==%s['"]\s*,\s*['"]console_scripts['"]\s*,\s*['"]%s['"]""" % (
        re.escape(dist.name),
        re.escape(dist.version),
        re.escape(script),
    )
    return re.search(pattern, head) is not None


def console_script_path(installed: Installed, key: str, script: str) -> str:
    """Absolute path of ``script`` as installed for the effective distribution ``key``, never
    looked up on PATH.

    The RECORD entry wins; without one (Debian's apt packages, setuptools installs), the scripts
    directory of the distribution's prefix is used and the script must import the entry point's
    module (or name the distribution, for setuptools' scripts).
    """
    dist = installed[key]
    module = _console_script_module(installed, key, script)
    recorded = [p for p in _recorded_scripts(dist, script) if _is_executable_file(p)]
    if len(set(recorded)) > 1:
        raise Refused("%s records %r more than once: %s" % (dist.describe(), script, recorded))
    if recorded:
        return recorded[0]
    candidates = [os.path.join(d, script) for d in _scripts_dirs(dist)]
    for path in candidates:
        if _is_executable_file(path) and _script_names_distribution(path, dist, script, module):
            return path
    raise Refused(
        "%s: console script %r not found (RECORD has none; looked at %s). The site can "
        "reinstall it so that its scripts are installed (python3 -m pip install "
        "--force-reinstall --no-deps %s)"
        % (
            installed.describe(key),
            script,
            ", ".join(candidates) or "no scripts directory",
            dist.name,
        )
    )


def abi_tag() -> str:
    """The interpreter's wheel ABI tag, e.g. cp311, cp313t, pypy39_pp73."""
    soabi = sysconfig.get_config_var("SOABI") or ""
    implementation = sys.implementation.name
    if implementation == "cpython":
        match = re.match(r"cpython-(\d+)([a-z]*)", soabi)
        if match:
            return "cp" + match.group(1) + match.group(2)
        debug = "d" if hasattr(sys, "gettotalrefcount") else ""
        return "cp%d%d%s" % (sys.version_info[0], sys.version_info[1], debug)
    if soabi:
        return re.sub(r"[-.]", "_", soabi)
    return "none"


def interpreter_path() -> str:
    """The resolved path of the running interpreter, the one later jobs install into.

    A venv's interpreter is a symlink to its base interpreter, and only through the venv's own
    path does it use the venv: there the directories are resolved and the name is kept.
    """
    executable = sys.executable
    if not executable or not os.path.isabs(executable):
        raise Refused(
            "the interpreter cannot name its own path (sys.executable is %r); the site can "
            "make python3 an absolute path on the image's PATH" % executable
        )
    if sys.prefix != sys.base_prefix:
        directory, name = os.path.split(os.path.normpath(executable))
        return os.path.join(os.path.realpath(directory), name)
    return os.path.realpath(executable)


def python_facts() -> Dict[str, str]:
    return {
        "implementation": sys.implementation.name.casefold(),
        "version": "%d.%d.%d" % tuple(sys.version_info[:3]),
        "abi": abi_tag(),
        "executable": interpreter_path(),
    }


def _require(installed: Installed, names: Iterable[str], why: str, search: Sequence[str]) -> None:
    missing = sorted({normalize_name(n) for n in names} - set(installed.effective))
    if missing:
        raise Refused(
            "%s not installed for %s (searched %s). %s"
            % (", ".join(missing), sys.executable, ", ".join(search) or "nothing", why)
        )


WHY_PIP = (
    "A client image needs pip, installed for that python3 (the first on the image's PATH, else "
    "in the usual directories); the site can install it there (apt-get install python3-pip, "
    "or python3 -m ensurepip)"
)
WHY_REQUIRED = (
    "The site profile's [inspection] client_distributions requires them; the site can install "
    "them for that python3 or drop them from that list"
)
WHY_VLLM = (
    "A serving image needs the vllm distribution, installed for that python3 (the first on the "
    "image's PATH, else in the usual directories); the site can install it there or import the "
    "image as a client"
)


def client_facts(
    required: Iterable[str] = (), path: Optional[Sequence[str]] = None
) -> Dict[str, Any]:
    """Facts of a client image; pip is always required, ``required`` names more."""
    search = list(sys.path if path is None else path)
    installed = find_distributions(search)
    _require(installed, ["pip"], WHY_PIP, search)
    _require(installed, required, WHY_REQUIRED, search)
    pip = installed["pip"]
    dists = installed.effective
    return {
        "python": python_facts(),
        "distributions": [{"name": key, "version": dists[key].version} for key in sorted(dists)],
        "installer": {
            "name": "pip",
            "version": pip.version,
            "path": console_script_path(installed, "pip", "pip"),
        },
        "shadowed": installed.shadowed_facts(),
    }


def serving_facts(path: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Facts of a serving image: the effective vllm distribution and its console script."""
    search = list(sys.path if path is None else path)
    installed = find_distributions(search)
    _require(installed, ["vllm"], WHY_VLLM, search)
    vllm = installed["vllm"]
    return {
        "server": {
            "name": "vllm",
            "version": vllm.version,
            "path": console_script_path(installed, "vllm", "vllm"),
        },
        "shadowed": installed.shadowed_facts(),
    }


def build_record(role: str, sqsh_sha256: str, facts: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "inspector_version": INSPECTOR_VERSION,
        "role": role,
        "sqsh_sha256": sqsh_sha256,
        "machine": platform.machine() or "unknown",
        "facts": facts,
    }


def encode_record(record: Dict[str, Any]) -> bytes:
    return (json.dumps(record, sort_keys=True, ensure_ascii=True) + "\n").encode("ascii")


def write_atomically(path: str, data: bytes) -> None:
    """Write ``data`` at ``path``: private temp file in the same directory, fsync, rename,
    fsync the directory. On any failure nothing is left: neither the temp file nor ``path``."""
    directory = os.path.dirname(path)
    fd, temp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    renamed = False
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.rename(temp, path)
        renamed = True
        dir_fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except BaseException:
        for leftover in (path,) if renamed else (temp,):
            with contextlib.suppress(OSError):
                os.unlink(leftover)
        raise


def required_from_environment(role: str, environ: Dict[str, str]) -> List[str]:
    raw = environ.get(REQUIRE_ENV, "")
    if not raw:
        return []
    if role != "client":
        raise UsageError("%s applies to the client role only" % REQUIRE_ENV)
    names = raw.split(",")
    for name in names:
        if not _PROJECT_NAME.match(name):
            raise UsageError("%s: %r is not a distribution name" % (REQUIRE_ENV, name))
    return names


def parse_arguments(argv: Sequence[str]) -> Tuple[str, str, str]:
    if len(argv) != 3:
        raise UsageError("expected 3 arguments, got %d" % len(argv))
    role, sqsh_sha256, output = argv
    if role not in ROLES:
        raise UsageError("ROLE must be client or serving, not %r" % role)
    if not _SHA256.match(sqsh_sha256):
        raise UsageError("SQSH_SHA256 must be 64 lowercase hex digits")
    if not os.path.isabs(output) or output.endswith("/") or "\0" in output:
        raise UsageError("OUTPUT_PATH must be an absolute file path, not %r" % output)
    return role, sqsh_sha256, output


def main(argv: Optional[Sequence[str]] = None, environ: Optional[Dict[str, str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ if environ is None else environ)
    try:
        role, sqsh_sha256, output = parse_arguments(args)
        required = required_from_environment(role, env)
    except UsageError as error:
        sys.stderr.write("inspect_image: usage error: %s\n" % error)
        sys.stderr.write("usage: inspect_image.py client|serving SQSH_SHA256 OUTPUT_PATH\n")
        return EXIT_USAGE
    try:
        facts = client_facts(required) if role == "client" else serving_facts()
    except Refused as error:
        sys.stderr.write("inspect_image: refused (%s image): %s\n" % (role, error))
        return EXIT_REFUSED
    try:
        write_atomically(output, encode_record(build_record(role, sqsh_sha256, facts)))
    except OSError as error:
        sys.stderr.write("inspect_image: cannot write %s: %s\n" % (output, error))
        return EXIT_WRITE_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
