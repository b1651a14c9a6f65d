"""merge_layers.py, the job's streaming merger, on hand-built layers squashed by tar2sqfs.

Each case builds the layers Enroot would unpack one directory each and checks the squashfs
file the merged stream makes: what is in it, with which mode, owner, size and contents.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from layer_streams import (
    Member,
    directory,
    hardlink,
    listing,
    merger_peak_memory,
    opaque,
    regular,
    squash_stream,
    symlink,
    unpack,
    whiteout,
    write_config,
    write_large_layer,
    write_layer,
)
from support import unavailable


@pytest.fixture(autouse=True)
def _squash_tools() -> None:
    if not (shutil.which("tar2sqfs") and shutil.which("unsquashfs") and shutil.which("zstd")):
        unavailable(
            "needs tar2sqfs (squashfs-tools-ng), unsquashfs and zstd: scripts/test installs them"
        )


def _image(tmp_path: Path, *layers: list[Member], settings: dict[str, object] | None = None,
           compression: str = "gzip") -> Path:  # fmt: skip
    paths = [
        write_layer(tmp_path / f"layer{number}", members, compression)
        for number, members in enumerate(layers)
    ]
    output = tmp_path / "image.sqsh"
    result = squash_stream(write_config(tmp_path / "config.json", settings), paths, output)
    assert result.returncode == 0, result.stderr.decode()
    return output


def test_a_whiteout_hides_the_path_and_everything_below_it_in_lower_layers(
    tmp_path: Path,
) -> None:
    image = _image(
        tmp_path,
        [directory("a"), regular("a/x", "x"), regular("a/y", "y"), directory("a/sub"),
         regular("a/sub/deep", "d")],
        [directory("a"), whiteout("a/x"), whiteout("a/sub")],
    )  # fmt: skip
    paths = set(listing(image))
    assert {"a", "a/y"} <= paths
    assert not {"a/x", "a/sub", "a/sub/deep"} & paths
    assert not [path for path in paths if ".wh." in path]


def test_a_whiteout_hides_nothing_in_its_own_layer(tmp_path: Path) -> None:
    image = _image(
        tmp_path,
        [regular("f", "old")],
        [regular("f", "new"), whiteout("f")],
    )
    root = unpack(image, tmp_path / "root")
    assert (root / "f").read_text() == "new"


def test_an_opaque_directory_hides_what_lower_layers_hold_in_it_and_keeps_its_own(
    tmp_path: Path,
) -> None:
    image = _image(
        tmp_path,
        [directory("b", 0o755), regular("b/old", "o"), directory("b/dir"), regular("b/dir/f")],
        [directory("b", 0o750), opaque("b"), regular("b/new", "n")],
        [regular("top", "t")],
    )
    entries = listing(image)
    assert "b/new" in entries
    assert not {"b/old", "b/dir", "b/dir/f"} & set(entries)
    # the directory's attributes are the top layer's that holds it, as the overlay shows them
    assert entries["b"][0] == "drwxr-x---"


def test_a_file_over_a_directory_hides_the_directory_and_its_contents(tmp_path: Path) -> None:
    image = _image(
        tmp_path,
        [directory("lib"), regular("lib/libc.so", "c")],
        [symlink("lib", "usr/lib")],
    )
    entries = listing(image)
    assert entries["lib"][0].startswith("l")
    assert entries["lib"][3] == "usr/lib"
    assert "lib/libc.so" not in entries


def test_upper_files_replace_lower_ones_and_directories_merge(tmp_path: Path) -> None:
    image = _image(
        tmp_path,
        [directory("etc"), regular("etc/a", "lower a"), regular("etc/b", "lower b")],
        [directory("etc"), regular("etc/a", "upper a", mode=0o600)],
    )
    root = unpack(image, tmp_path / "root")
    assert (root / "etc/a").read_text() == "upper a"
    assert (root / "etc/b").read_text() == "lower b"
    assert listing(image)["etc/a"][0] == "-rw-------"


def test_hard_links_stay_links_to_their_layers_file(tmp_path: Path) -> None:
    image = _image(
        tmp_path,
        [regular("bin/tool", "tool", mode=0o755), hardlink("bin/alias", "bin/tool"),
         hardlink("bin/other", "bin/tool")],
    )  # fmt: skip
    root = unpack(image, tmp_path / "root")
    inode = (root / "bin/tool").stat().st_ino
    assert (root / "bin/alias").stat().st_ino == inode
    assert (root / "bin/other").stat().st_ino == inode
    assert (root / "bin/tool").stat().st_nlink == 3
    assert (root / "bin/alias").read_text() == "tool"


def test_a_hard_link_whose_target_an_upper_layer_hid_keeps_the_hidden_data(
    tmp_path: Path,
) -> None:
    image = _image(
        tmp_path,
        [regular("data", "lower data", mode=0o640), hardlink("copy", "data"),
         hardlink("copy2", "data")],
        [regular("data", "upper data")],
    )  # fmt: skip
    root = unpack(image, tmp_path / "root")
    assert (root / "data").read_text() == "upper data"
    assert (root / "copy").read_text() == "lower data"
    assert (root / "copy2").stat().st_ino == (root / "copy").stat().st_ino
    assert listing(image)["copy"][0] == "-rw-r-----"


def test_modes_get_enroots_fixperms_and_every_owner_is_root(tmp_path: Path) -> None:
    deep = "/".join(f"d{level}" for level in range(1, 17))
    image = _image(
        tmp_path,
        [regular("setuid", "s", mode=0o4111), regular("locked", "l", mode=0o000),
         regular("script", "x", mode=0o010), directory("closed", mode=0o000),
         *[directory(deep.rsplit("/", 16 - level)[0], mode=0o555) for level in range(1, 17)],
         regular("owned", "o", uid=1234)],
    )  # fmt: skip
    entries = listing(image)
    assert entries["setuid"][0] == "-r-s--x--x"
    assert entries["locked"][0] == "-r--------"
    assert entries["script"][0] == "-r-x--x---"
    assert entries["closed"][0] == "drwx------"
    # u+w reaches directories at most 14 levels deep, as find -maxdepth 15 does
    assert entries["/".join(deep.split("/")[:14])][0] == "drwxr-xr-x"
    assert entries["/".join(deep.split("/")[:15])][0] == "dr-xr-xr-x"
    assert {owner for _, owner, _, _ in entries.values()} == {"0/0"}


def test_nothing_under_dev_is_unpacked(tmp_path: Path) -> None:
    image = _image(
        tmp_path,
        [directory("dev"), regular("dev/null", "n"), regular("./dev/zero", "z"),
         directory("dev/shm"), regular("kept", "k")],
    )  # fmt: skip
    entries = listing(image)
    assert "dev" in entries
    assert "kept" in entries
    assert not [path for path in entries if path.startswith("dev/")]


@pytest.mark.parametrize("name", ["../escape", "a/../../b", "c/../d"])
def test_a_member_name_with_dot_dot_is_refused_as_tar_refuses_it(tmp_path: Path, name: str) -> None:
    layer = write_layer(tmp_path / "layer", [regular("kept"), regular(name, "x")])
    result = squash_stream(write_config(tmp_path / "config.json"), [layer], tmp_path / "out")
    assert result.returncode == 3
    assert b"contains '..'" in result.stderr


@pytest.mark.parametrize("compression", ["gzip", "zstd", "plain"])
def test_layers_are_read_plain_gzip_or_zstd(tmp_path: Path, compression: str) -> None:
    image = _image(
        tmp_path,
        [regular("bottom", "b")],
        [regular("top", "t"), whiteout("bottom")],
        compression=compression,
    )
    root = unpack(image, tmp_path / "root")
    assert (root / "top").read_text() == "t"
    assert not (root / "bottom").exists()


def test_enroots_conversions_are_the_top_layer(tmp_path: Path) -> None:
    settings: dict[str, object] = {
        "Env": ["PATH=/usr/bin:/bin", "LANG=C.UTF-8"],
        "WorkingDir": "/srv/app",
        "Entrypoint": ["/entry", "it's"],
        "Cmd": ["--flag"],
        "Labels": {"maintainer": "someone\nelse"},
        "Volumes": {"/data": {}, "/cache": {}},
    }
    image = _image(
        tmp_path,
        [directory("etc"), regular("etc/environment", "FROM_IMAGE=1\n"),
         regular("etc/fstab", "old\n"), regular("etc/rc", "old rc\n")],
        settings=settings,
    )  # fmt: skip
    root = unpack(image, tmp_path / "root")
    assert (root / "etc/environment").read_text() == "PATH=/usr/bin:/bin\nLANG=C.UTF-8\n"
    assert (root / "etc/fstab").read_text() == (
        "${ENROOT_ROOTFS}/cache /cache none x-create=dir,bind,rw,nosuid,nodev\n"
        "${ENROOT_ROOTFS}/data /data none x-create=dir,bind,rw,nosuid,nodev\n"
    )
    rc = (root / "etc/rc").read_text()
    assert rc.startswith(
        "# enroot-provenance: docker://registry#image:tag\n# maintainer someone else\n\n"
        'mkdir -p "/srv/app" 2> /dev/null\ncd "/srv/app" && unset OLDPWD || exit 1\n'
    )
    assert "    exec '/entry' 'it'\\''s' \"$@\"\n" in rc
    assert "    exec '/entry' 'it'\\''s' '--flag'\n" in rc
    assert (root / "etc/rc.local").read_text().startswith("# This file is sourced by /etc/rc")
    assert (root / "srv/app").is_dir()


def test_without_entrypoint_or_command_the_rc_runs_a_shell(tmp_path: Path) -> None:
    image = _image(tmp_path, [regular("f")])
    root = unpack(image, tmp_path / "root")
    assert "    exec  '/bin/sh'\n" in (root / "etc/rc").read_text()
    assert (root / "etc/environment").read_text() == ""


def test_a_directory_only_implied_by_a_layer_gets_tars_mode_under_the_umask(
    tmp_path: Path,
) -> None:
    blobs = [
        write_layer(tmp_path / "lower", [directory("shared", 0o711), regular("shared/a"),
                                         directory("hid", 0o711), regular("hid/kept")]),
        write_layer(tmp_path / "upper", [regular("shared/b"), regular("new/deep/c"),
                                         regular("hid/gone")]),
        write_layer(tmp_path / "top", [whiteout("hid/gone")]),
    ]  # fmt: skip
    old = os.umask(0o027)
    try:
        result = squash_stream(write_config(tmp_path / "config.json"), blobs, tmp_path / "out")
    finally:
        os.umask(old)
    assert result.returncode == 0, result.stderr.decode()
    entries = listing(tmp_path / "out")
    # the upper layer holds shared/ as b's parent: the overlay shows tar's mode, not 0711
    assert entries["shared"][0] == "drwxr-x---"
    assert entries["new"][0] == entries["new/deep"][0] == "drwxr-x---"
    # so does hid/, which the upper layer holds as the parent of a file whited out above it
    assert entries["hid"][0] == "drwxr-x---"
    assert "hid/kept" in entries and "hid/gone" not in entries
    assert {"shared/a", "shared/b", "new/deep/c"} <= set(entries)
    assert entries["etc/rc"][0] == "-rw-r-----"


def test_a_path_twice_in_one_layer_is_refused(tmp_path: Path) -> None:
    layer = write_layer(tmp_path / "layer", [regular("f", "1"), regular("f", "2")])
    result = squash_stream(write_config(tmp_path / "config.json"), [layer], tmp_path / "out")
    assert result.returncode == 3
    assert b"holds f twice" in result.stderr


def test_a_hard_link_to_nothing_the_layer_holds_is_refused(tmp_path: Path) -> None:
    lower = write_layer(tmp_path / "lower", [regular("elsewhere", "e")])
    upper = write_layer(tmp_path / "upper", [hardlink("link", "elsewhere")])
    config = write_config(tmp_path / "config.json")
    result = squash_stream(config, [lower, upper], tmp_path / "out")
    assert result.returncode == 3
    assert b"the hard link link points to elsewhere" in result.stderr


def test_a_truncated_layer_is_refused(tmp_path: Path) -> None:
    layer = write_layer(tmp_path / "layer", [regular("big", b"x" * 100_000)], "zstd")
    layer.write_bytes(layer.read_bytes()[:-20])
    result = squash_stream(write_config(tmp_path / "config.json"), [layer], tmp_path / "out")
    assert result.returncode == 3
    assert b"layer" in result.stderr


def test_a_large_file_is_streamed_not_held(tmp_path: Path) -> None:
    size = 512 * 1024 * 1024
    layer = write_large_layer(tmp_path / "layer", "big", size)
    peak_kib = merger_peak_memory(write_config(tmp_path / "config.json"), [layer])
    assert peak_kib < 100 * 1024, f"the merger held {peak_kib} KiB for a {size}-byte file"
