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
  3  refused: the image does not satisfy the role (missing or duplicate distribution, console
     script not found, unreadable metadata); nothing written
  4  the record could not be written; nothing left behind

The record is one JSON object (schema_version 1): role, sqsh_sha256, inspector_version and the
facts of the role. Each fact is taken from the one distribution that owns it: a `pip` or `vllm`
elsewhere on PATH is never consulted. This file is both the program staged into the image and
the module the host imports; it must run on Python 3.8 and newer with the standard library only.
"""

from __future__ import annotations

import contextlib
import csv
import importlib.metadata
import io
import json
import os
import re
import sys
import sysconfig
import tempfile
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

INSPECTOR_VERSION = "1.0.0"
SCHEMA_VERSION = 1
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


def normalize_name(name: str) -> str:
    """PEP 503 normalized form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _read_metadata(dist: importlib.metadata.Distribution) -> Tuple[Optional[str], Optional[str]]:
    # get_all, not []: a missing key through [] warns on 3.12+ and is meant to raise later
    metadata = dist.metadata
    names = metadata.get_all("Name") or [None]
    versions = metadata.get_all("Version") or [None]
    return names[0], versions[0]


def find_distributions(path: Optional[Sequence[str]] = None) -> Dict[str, Distribution]:
    """Every distribution on ``path`` (default sys.path) by normalized name.

    Raises Refused when one name is installed twice or a distribution has no name or version.
    The same metadata directory reached through two sys.path entries counts once.
    """
    found: Dict[str, List[Distribution]] = {}
    seen = set()
    search = list(sys.path if path is None else path)
    for raw in importlib.metadata.distributions(path=search):
        name, version = _read_metadata(raw)
        if not name or not version:
            where = getattr(raw, "_path", "an unknown location")
            raise Refused("unreadable distribution metadata (no name or version) at %s" % where)
        dist = Distribution(raw, name.strip(), version.strip())
        marker = dist.metadata_path or (dist.key, dist.version, dist.location)
        if marker in seen:
            continue
        seen.add(marker)
        found.setdefault(dist.key, []).append(dist)
    duplicates = {key: dists for key, dists in found.items() if len(dists) > 1}
    if duplicates:
        lines = [
            "%s is installed %d times: %s"
            % (key, len(dists), "; ".join(d.describe() for d in dists))
            for key, dists in sorted(duplicates.items())
        ]
        raise Refused("duplicate distributions: " + " | ".join(lines))
    return {key: dists[0] for key, dists in found.items()}


def _console_script_module(dist: Distribution, script: str) -> str:
    values = set()
    for entry in dist.dist.entry_points:
        if entry.group == "console_scripts" and entry.name == script:
            values.add(entry.value)
    if not values:
        raise Refused("%s declares no %r console script" % (dist.describe(), script))
    if len(values) > 1:
        raise Refused("%s declares the %r console script twice" % (dist.describe(), script))
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


def console_script_path(dist: Distribution, script: str) -> str:
    """Absolute path of ``script`` as installed for ``dist``, never looked up on PATH.

    The RECORD entry wins; without one (Debian's apt packages, setuptools installs), the scripts
    directory of the distribution's prefix is used and the script must import the entry point's
    module (or name the distribution, for setuptools' scripts).
    """
    module = _console_script_module(dist, script)
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
        "%s: console script %r not found (RECORD has none; looked at %s)"
        % (dist.describe(), script, ", ".join(candidates) or "no scripts directory")
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


def python_facts() -> Dict[str, str]:
    return {
        "implementation": sys.implementation.name.casefold(),
        "version": "%d.%d.%d" % tuple(sys.version_info[:3]),
        "abi": abi_tag(),
    }


def _require(dists: Dict[str, Distribution], names: Iterable[str]) -> None:
    missing = sorted({normalize_name(n) for n in names} - set(dists))
    if missing:
        raise Refused("required distributions not installed: %s" % ", ".join(missing))


def client_facts(
    required: Iterable[str] = (), path: Optional[Sequence[str]] = None
) -> Dict[str, Any]:
    """Facts of a client image; pip is always required, ``required`` names more."""
    dists = find_distributions(path)
    _require(dists, ["pip", *required])
    pip = dists["pip"]
    return {
        "python": python_facts(),
        "distributions": [{"name": key, "version": dists[key].version} for key in sorted(dists)],
        "installer": {
            "name": "pip",
            "version": pip.version,
            "path": console_script_path(pip, "pip"),
        },
    }


def serving_facts(path: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Facts of a serving image: the one vllm distribution and its console script."""
    dists = find_distributions(path)
    _require(dists, ["vllm"])
    vllm = dists["vllm"]
    return {
        "server": {
            "name": "vllm",
            "version": vllm.version,
            "path": console_script_path(vllm, "vllm"),
        }
    }


def build_record(role: str, sqsh_sha256: str, facts: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "inspector_version": INSPECTOR_VERSION,
        "role": role,
        "sqsh_sha256": sqsh_sha256,
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
