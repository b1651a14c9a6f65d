"""Merge an image's layers into one tar stream of the root Enroot's import would squash.

Usage: python3 -I -B merge_layers.py CONFIG URI LAYER... >STREAM

  CONFIG  the image's configuration blob (JSON: plain, gzip or zstd)
  URI     the provenance Enroot writes at the head of /etc/rc (docker://REGISTRY#IMAGE:TAG)
  LAYER   the layer blobs, bottom first as the manifest lists them (tar: plain, gzip or zstd)

Standard output gets one tar stream (pax) of the merged root, for `tar2sqfs`: what Enroot's
docker::_prepare_layers and docker::configure leave for enroot-mksquashovlfs, without a
directory on disk. The layers are read top first, each once, as streams (gzip through zlib,
zstd through the `zstd` program, as Enroot reads them): an entry is written when no layer above
it hid it, so the first layer to name a path decides it, as the overlay does:

- a whiteout (.wh.NAME) hides NAME and what is below it in the layers beneath, an opaque marker
  (.wh..wh..opq) everything the layers beneath hold in its directory; neither is written;
- anything else hides what the layers beneath hold at its path, and a non-directory what they
  hold below it too; a directory's attributes are those of the top layer holding it, and a
  directory a layer holds only as the parent of its entries gets the attributes tar would give
  it (0777 less the umask); a layer naming a directory twice, or after an entry inside it,
  leaves it as first written (tar2sqfs takes a path once);
- nothing under dev/ is unpacked (Enroot's --exclude='dev/*'); a member name with '..' fails
  the merge, as it fails tar; the root takes the attributes of the directory Enroot makes;
- modes get common::fixperms' u+rX, and u+w on directories at most 14 levels deep; every owner
  is root (mksquashfs -all-root); extended attributes are not kept (tar -p does not restore
  them);
- a hard link is written as one when its target is written from the same layer; when an upper
  layer hid the target, the layer is read again up to it and its data written under the link's
  name (the later links of the target point there), since the link keeps the hidden file's data;
- Enroot's conversions are the top layer: /etc/fstab (the config's Volumes), /etc/environment
  (its Env), /etc/rc (provenance, Labels, WorkingDir, Entrypoint and Cmd), /etc/rc.local, and
  the directories of /etc and of WorkingDir (a WorkingDir leaving the root makes nothing).

Memory holds the names of the paths seen, never a layer's data: a member's data is copied from
the decompressing stream to the output in blocks. Nothing is written to disk.

Exit codes:
  0  the stream was written
  2  usage error (bad arguments); nothing written
  3  refused: a blob that cannot be read (not tar, truncated, zstd failing), a configuration
     that is not a JSON object, a member name with '..', one path twice in a layer
     (directories excepted), a hard link to nothing the layer holds; the stream stops there,
     unterminated
  4  the stream could not be written (the reader went away)
"""

from __future__ import annotations

import copy
import gzip
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import zlib
from typing import IO, Any, Dict, Iterator, List, Optional, Set, Tuple, cast

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_WRITE_FAILED = 4

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# common::fixperms: `find . -maxdepth 15 -type d` from the directory holding the layers' own
FIXPERMS_DEPTH = 14
COPY_BLOCK = 1024 * 1024
RC_LOCAL = (
    "# This file is sourced by /etc/rc when the container starts.\n"
    "# It can be used to manipulate the entrypoint or the command of the container.\n"
)
_SAFE_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Refused(Exception):
    """The input cannot be merged; the message says which blob and why."""


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def parts_of(name: str) -> Optional[str]:
    """The path of a member relative to the root ('' for the root), None when it holds '..'."""
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        return None
    return "/".join(parts)


def ancestors(path: str) -> Iterator[str]:
    """The directories above PATH, the root ('') first."""
    yield ""
    parts = path.split("/")
    for end in range(1, len(parts)):
        yield "/".join(parts[:end])


def excluded(path: str) -> bool:
    return path.startswith("dev/")


class Blob:
    """A blob read as one decompressed stream, by magic number: gzip, zstd or neither. An
    abandoned one may be left before its end; any other is read to its end, and zstd's status
    checked."""

    def __init__(self, path: str, abandon: bool = False) -> None:
        self.path = path
        self.abandon = abandon
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.stream: IO[bytes]

    def __enter__(self) -> IO[bytes]:
        with open(self.path, "rb") as handle:
            magic = handle.read(4)
        if magic == ZSTD_MAGIC:
            self.process = subprocess.Popen(
                ["zstd", "-q", "-d", "-c", "--", self.path], stdout=subprocess.PIPE
            )
            assert self.process.stdout is not None
            self.stream = self.process.stdout
        elif magic[:2] == GZIP_MAGIC:
            self.stream = cast(IO[bytes], gzip.open(self.path, "rb"))
        else:
            self.stream = open(self.path, "rb")
        return self.stream

    def __exit__(self, kind: Any, value: Any, trace: Any) -> None:
        ended = kind is None and not self.abandon
        try:
            while ended and self.stream.read(COPY_BLOCK):
                pass
        finally:
            self.stream.close()
            if self.process is not None:
                if not ended:
                    self.process.kill()
                status = self.process.wait()
                if ended and status != 0:
                    raise Refused("%s: zstd failed with status %d" % (self.path, status))


def members(path: str, abandon: bool = False) -> Iterator[Tuple[tarfile.TarInfo, tarfile.TarFile]]:
    """Every member of the layer at PATH, read as a stream, with the archive to read its data;
    ABANDON: the caller may stop before the end."""
    try:
        with Blob(path, abandon) as stream, tarfile.open(fileobj=stream, mode="r|") as archive:
            for member in archive:
                yield member, archive
    except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
        raise Refused("%s: not a readable tar layer (%s)" % (path, error)) from None


def fixed_mode(member: tarfile.TarInfo, depth: int) -> int:
    """common::fixperms: chmod -R u+rX, then u+w on the directories find reaches."""
    mode = member.mode & 0o7777
    if member.issym():
        return mode
    mode |= 0o400
    if member.isdir() or mode & 0o111:
        mode |= 0o100
    if member.isdir() and depth <= FIXPERMS_DEPTH:
        mode |= 0o200
    return mode


class Merger:
    """The layers, top first, into one tar archive."""

    def __init__(self, output: tarfile.TarFile, umask: int, now: int) -> None:
        self.output = output
        self.dir_mode = 0o777 & ~umask
        self.file_mode = 0o666 & ~umask
        self.now = now
        # the paths an upper layer decided (written, hidden or whited out)
        self.seen: Set[str] = set()
        # the paths below which an upper layer hides everything
        self.covered: Set[str] = set()
        # the paths in the output
        self.written: Set[str] = set()

    def hidden(self, path: str) -> bool:
        return path in self.seen or any(above in self.covered for above in ancestors(path))

    def add(self, info: tarfile.TarInfo, data: Optional[IO[bytes]] = None) -> None:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.pax_headers = {}
        self.output.addfile(info, data)
        self.written.add(info.name)

    def add_parents(self, path: str) -> None:
        for above in ancestors(path):
            if above and above not in self.written:
                self.add(self.directory(above, self.dir_mode, self.now))

    def directory(self, path: str, mode: int, mtime: int) -> tarfile.TarInfo:
        info = tarfile.TarInfo(path or ".")
        info.type = tarfile.DIRTYPE
        info.mode = mode
        info.mtime = mtime
        return info

    def add_file(self, path: str, text: str) -> None:
        data = text.encode("utf-8", "surrogateescape")
        info = tarfile.TarInfo(path)
        info.size = len(data)
        info.mode = self.file_mode
        info.mtime = self.now
        self.add_parents(path)
        self.add(info, io.BytesIO(data))

    def add_conversions(self, config: Dict[str, Any], uri: str) -> None:
        """docker::configure, in the directory Enroot stacks above the layers."""
        settings = config.get("config")
        settings = settings if isinstance(settings, dict) else {}
        self.add(self.directory("", self.dir_mode, self.now))
        self.add(self.directory("etc", self.dir_mode, self.now))
        self.add_file("etc/fstab", fstab_text(settings))
        self.add_file("etc/environment", environment_text(settings))
        self.add_file("etc/rc", rc_text(settings, uri))
        self.add_file("etc/rc.local", RC_LOCAL)
        for path in working_directories(first_line(jq_text(settings.get("WorkingDir")))):
            if path not in self.written:
                self.add(self.directory(path, self.dir_mode, self.now))
        self.seen |= self.written
        self.covered |= {"etc/fstab", "etc/environment", "etc/rc", "etc/rc.local"}

    def add_linked(self, path: str, target: str, name: str) -> None:
        """The data of TARGET, a regular file of the layer at PATH, written as NAME."""
        for member, again in members(path, abandon=True):
            if parts_of(member.name) == target and member.isreg():
                info = copy.copy(member)
                info.name = name
                info.type = tarfile.REGTYPE
                info.mode = fixed_mode(member, name.count("/") + 1)
                self.add(info, again.extractfile(member))
                return
        raise Refused(
            "%s: the hard link %s points to %s, which the layer does not hold"
            % (path, name, target)
        )

    def add_layer(self, path: str) -> None:
        """One layer, below every layer added before it."""
        here: Dict[str, bool] = {}
        seen: Set[str] = set()
        covered: Set[str] = set()
        links: Dict[str, str] = {}
        for member, archive in members(path):
            name = parts_of(member.name)
            if name is None:
                raise Refused("%s: the member name %s contains '..'" % (path, member.name))
            if not name or excluded(name):
                continue
            parent, _, base = name.rpartition("/")
            seen.update(ancestors(name))
            if base == OPAQUE:
                covered.add(parent)
                continue
            if base.startswith(WHITEOUT):
                if base[len(WHITEOUT) :] not in ("", ".", ".."):
                    target = name[: -len(base)] + base[len(WHITEOUT) :]
                    seen.add(target)
                    covered.add(target)
                continue
            if name in here:
                if here[name] and member.isdir():
                    continue
                raise Refused("%s: the layer holds %s twice" % (path, name))
            here[name] = member.isdir()
            seen.add(name)
            if not member.isdir():
                covered.add(name)
            if self.hidden(name) or name in self.written:
                continue
            self.add_member(path, member, archive, name, links)
        self.seen |= seen
        self.covered |= covered

    def add_member(
        self,
        path: str,
        member: tarfile.TarInfo,
        archive: tarfile.TarFile,
        name: str,
        links: Dict[str, str],
    ) -> None:
        info = copy.copy(member)
        info.name = name
        info.mode = fixed_mode(member, name.count("/") + 1)
        self.add_parents(name)
        if member.islnk():
            target = parts_of(member.linkname) or ""
            if target in links:
                info.linkname = links[target]
                links[name] = links[target]
                self.add(info)
                return
            # an upper layer hid the target: this link alone holds its data now
            links[target] = links[name] = name
            self.add_linked(path, target, name)
            return
        if member.isreg():
            info.type = tarfile.REGTYPE
            self.add(info, archive.extractfile(member))
            links[name] = name
            return
        self.add(info)


def jq_text(value: Any) -> str:
    """What `jq -r` prints for a value: nothing for null and false, strings raw, JSON else."""
    if value is None or value is False:
        return ""
    return value if isinstance(value, str) else json.dumps(value, indent=2)


def first_line(text: str) -> str:
    return text.split("\n", 1)[0]


def lines_of(values: Any) -> List[str]:
    """`jq -r '(.x[])? // empty' | readarray -t`: each element's text, split at newlines."""
    if not isinstance(values, list):
        return []
    text = "".join(jq_text(value) + "\n" for value in values if value is not None)
    return text.split("\n")[:-1] if text else []


def fstab_text(settings: Dict[str, Any]) -> str:
    volumes = settings.get("Volumes")
    if not isinstance(volumes, dict):
        return ""
    return "".join(
        "${ENROOT_ROOTFS}%s %s none x-create=dir,bind,rw,nosuid,nodev\n" % (key, key)
        for key in sorted(volumes)
    )


def environment_text(settings: Dict[str, Any]) -> str:
    environment = settings.get("Env")
    if not isinstance(environment, list):
        return ""
    return "".join(jq_text(line) + "\n" for line in environment if line is not None)


def bash_quote(word: str) -> str:
    """bash's ${word@Q}."""
    if not _SAFE_CONTROL.search(word):
        return "'" + word.replace("'", "'\\''") + "'"
    escapes = {"\a": "\\a", "\b": "\\b", "\x1b": "\\E", "\f": "\\f", "\n": "\\n"}
    escapes.update({"\r": "\\r", "\t": "\\t", "\v": "\\v", "\\": "\\\\", "'": "\\'"})
    quoted = "".join(
        escapes.get(char) or ("\\%03o" % ord(char) if _SAFE_CONTROL.match(char) else char)
        for char in word
    )
    return "$'" + quoted + "'"


def rc_text(settings: Dict[str, Any], uri: str) -> str:
    text = "# enroot-provenance: %s\n" % uri
    labels = settings.get("Labels")
    if isinstance(labels, dict):
        for key, value in labels.items():
            text += "# %s %s\n" % (key, jq_text(value).replace("\n", " "))
    text += "\n"
    workdir = first_line(jq_text(settings.get("WorkingDir"))) or "/"
    entrypoint = lines_of(settings.get("Entrypoint"))
    command = lines_of(settings.get("Cmd"))
    if not entrypoint and not command:
        command = ["/bin/sh"]
    entry = " ".join(bash_quote(word) for word in entrypoint)
    arguments = " ".join(bash_quote(word) for word in command)
    return text + (
        'mkdir -p "%s" 2> /dev/null\n'
        'cd "%s" && unset OLDPWD || exit 1\n'
        "\n"
        "if [ -s /etc/rc.local ]; then\n"
        "    . /etc/rc.local\n"
        "fi\n"
        "\n"
        "if [ $# -gt 0 ]; then\n"
        '    exec %s "$@"\n'
        "else\n"
        "    exec %s %s\n"
        "fi\n"
    ) % (workdir, workdir, entry, entry, arguments)


def working_directories(workdir: str) -> List[str]:
    """The directories `mkdir -p "${rootfs}${workdir}"` makes inside the root, in order."""
    if not workdir.startswith("/"):
        return []
    made: List[str] = []
    current: List[str] = []
    for part in workdir.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not current:
                return made
            current.pop()
            continue
        current.append(part)
        path = "/".join(current)
        if path not in made:
            made.append(path)
    return made


def read_config(path: str) -> Dict[str, Any]:
    try:
        with Blob(path) as stream:
            config = json.loads(stream.read())
    except (OSError, ValueError) as error:
        raise Refused("%s: not a readable image configuration (%s)" % (path, error)) from None
    if not isinstance(config, dict):
        raise Refused("%s: the image configuration is not a JSON object" % path)
    return config


def merge(config_path: str, uri: str, layers: List[str], output: IO[bytes]) -> None:
    """The whole stream: conversions, then the layers from the top one down."""
    config = read_config(config_path)
    with tarfile.open(fileobj=output, mode="w|", format=tarfile.PAX_FORMAT) as archive:
        merger = Merger(archive, current_umask(), int(time.time()))
        merger.add_conversions(config, uri)
        for layer in reversed(layers):
            merger.add_layer(layer)


def main(argv: List[str]) -> int:
    if len(argv) < 4:
        sys.stderr.write("usage: merge_layers.py CONFIG URI LAYER...\n")
        return EXIT_USAGE
    try:
        merge(argv[1], argv[2], argv[3:], sys.stdout.buffer)
    except Refused as error:
        sys.stderr.write("merge_layers: %s\n" % error)
        return EXIT_REFUSED
    except BrokenPipeError:
        sys.stderr.write("merge_layers: the stream's reader went away\n")
        return EXIT_WRITE_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv))
