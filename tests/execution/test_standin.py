"""The Enroot stand-in itself enforces docs/enroot.md: grammar checks and the traps it must keep."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from harness import (
    STANDIN,
    Standin,
    busybox_root,
    mksquashfs,
    need,
    need_squashfs_tools,
    path_without,
)

DIGEST = "sha256:" + "a" * 64


@pytest.fixture
def enroot(standin: Standin, tmp_path: Path):
    base = tmp_path / "enroot-dirs"
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "ENROOT_CACHE_PATH": str(base / "cache"),
        "ENROOT_DATA_PATH": str(base / "data"),
        "ENROOT_RUNTIME_PATH": str(base / "runtime"),
        "ENROOT_TEMP_PATH": str(tmp_path),
        "ENROOT_MAX_PROCESSORS": "2",
        "ENROOT_LOGIN_SHELL": "no",
    }
    standin.configure(hosts={"registry-1.docker.io": "127.0.0.1:9", "docker.io": "127.0.0.1:9"})

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        environment = {**env, **extra}
        for key in [k for k, v in extra.items() if v is None]:
            environment.pop(key)
        return subprocess.run(
            [str(standin.bin / "enroot"), *args],
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )

    return run


def test_version_prints_the_configured_version(enroot, standin: Standin) -> None:
    assert enroot("version").stdout == "4.1.2\n"
    standin.configure(version="3.5.0")
    assert enroot("version").stdout == "3.5.0\n"


def test_directories_are_created_before_any_command(enroot, tmp_path: Path) -> None:
    assert enroot("version").returncode == 0
    for name in ("cache", "data", "runtime"):
        assert (tmp_path / "enroot-dirs" / name).is_dir()


def test_default_runtime_path_is_refused_for_a_non_root_user(tmp_path: Path) -> None:
    need(shutil.which("setpriv") is not None, "setpriv missing (util-linux)")
    place = Path(os.environ.get("TMPDIR", "/tmp")) / f"standin-{os.getpid()}"
    place.mkdir(mode=0o755)
    (place / "run").mkdir(mode=0o755)  # as /run: root's; ${XDG_RUNTIME_DIR:-/run}/enroot
    for writable in ("cache", "data"):
        (place / writable).mkdir()
        (place / writable).chmod(0o777)
    try:
        shutil.copy(STANDIN, place / "enroot")
        (place / "enroot").chmod(0o755)
        result = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             str(place / "enroot"), "version"],
            env={
                "PATH": "/usr/bin:/bin",
                "HOME": str(place),
                "ENROOT_CACHE_PATH": str(place / "cache"),
                "ENROOT_DATA_PATH": str(place / "data"),
                "XDG_RUNTIME_DIR": str(place / "run"),
            },
            capture_output=True,
            text=True,
        )  # fmt: skip
    finally:
        shutil.rmtree(place)
    assert result.returncode == 1
    denied = f"mkdir: cannot create directory '{place}/run/enroot': Permission denied"
    assert denied in result.stderr


@pytest.mark.parametrize(
    ("version", "uri"),
    [
        ("4.1.2", "docker://localhost:5000#img@sha512:" + "a" * 128),
        ("4.1.2", "docker://localhost:5000#Img@" + DIGEST),
        ("4.1.2", "docker://localhost:5000#img@sha256:abc"),
        ("4.1.2", "docker://localhost:5000#img name"),
        ("4.1.2", "docker://localhost:5000#"),
        ("3.5.0", "docker://localhost:5000#img@" + DIGEST),
        ("3.5.0", "docker://localhost:5000#img:1@" + DIGEST),
        ("3.4.1", "docker://localhost:5000#img:1@" + DIGEST),
    ],
)
def test_import_refuses_invalid_image_references(
    enroot, standin: Standin, version: str, uri: str
) -> None:
    standin.configure(version=version)
    result = enroot("import", "-o", "/nonexistent/out.sqsh", uri)
    assert result.returncode == 1
    assert "[ERROR] Invalid image reference" in result.stderr


@pytest.mark.parametrize("uri", ["https://localhost:5000/img", "localhost:5000/img", "img"])
def test_import_refuses_other_schemes(enroot, uri: str) -> None:
    result = enroot("import", "-o", "/nonexistent/out.sqsh", uri)
    assert result.returncode == 1
    assert "[ERROR] Invalid argument" in result.stderr


@pytest.mark.parametrize(
    ("version", "uri", "parsed"),
    [
        ("4.1.2", "docker://127.0.0.1:9#team/img:1@" + DIGEST,
         (None, "127.0.0.1:9", "team/img", DIGEST)),
        ("4.1.2", "docker://127.0.0.1:9/team/img@" + DIGEST,
         (None, "127.0.0.1:9", "team/img", DIGEST)),
        ("4.1.2", "docker://ubuntu@" + DIGEST,
         (None, "registry-1.docker.io", "library/ubuntu", DIGEST)),
        ("4.1.2", "docker://localhost/foo:1", (None, "registry-1.docker.io", "localhost/foo", "1")),
        ("4.1.2", "docker://docker.io#library/ubuntu:22.04",
         (None, "docker.io", "library/ubuntu", "22.04")),
        ("4.1.2", "docker://ubuntu", (None, "registry-1.docker.io", "library/ubuntu", "latest")),
        # 3.x: a digest only in tag position, and `ubuntu@sha256:` misread as a user name
        ("3.5.0", "docker://127.0.0.1:9#img:" + DIGEST, (None, "127.0.0.1:9", "img", DIGEST)),
        ("3.5.0", "docker://ubuntu@" + DIGEST,
         ("ubuntu", "registry-1.docker.io", "library/sha256", "a" * 64)),
        # 3.x: REG/IMAGE@sha256: makes the registry and image a user name (docs/enroot.md, "Import")
        ("3.4.1", "docker://127.0.0.1:9/team/img@" + DIGEST,
         ("127.0.0.1:9/team/img", "registry-1.docker.io", "library/sha256", "a" * 64)),
        ("3.4.1", "docker://127.0.0.1:9#team/img:" + DIGEST,
         (None, "127.0.0.1:9", "team/img", DIGEST)),
    ],
)  # fmt: skip
def test_import_reads_references_like_that_enroot_version(
    enroot, standin: Standin, version: str, uri: str, parsed: tuple
) -> None:
    standin.configure(version=version)
    result = enroot("import", "-o", "/nonexistent/out.sqsh", uri)
    event = standin.event("import")
    assert (event["user"], event["registry"], event["image"], event["reference"]) == parsed
    assert result.returncode == 7  # accepted: then curl cannot connect (nobody serves port 9)


@pytest.mark.parametrize("arch", ["amd64", "arm64", "i686", "X86_64"])
def test_import_refuses_architectures_enroot_does_not_know(enroot, arch: str) -> None:
    result = enroot("import", "-a", arch, "-o", "/nonexistent/x.sqsh", "docker://img@" + DIGEST)
    assert result.returncode == 1


def test_import_refuses_an_existing_output_before_any_download(
    enroot, standin: Standin, tmp_path: Path
) -> None:
    existing = tmp_path / "exists.sqsh"
    existing.write_bytes(b"x")
    linked = tmp_path / "link.sqsh"
    linked.symlink_to(existing)
    for output in (existing, linked):
        result = enroot("import", "-o", str(output), "docker://127.0.0.1:9#img@" + DIGEST)
        assert result.returncode == 1
        assert f"[ERROR] File already exists: {existing}" in result.stderr
    assert [e["event"] for e in standin.records()].count("import") == 2
    assert existing.read_bytes() == b"x"


def test_import_of_plain_http_registry_without_allow_http_fails_like_curl(
    enroot, tmp_path: Path
) -> None:
    need(
        subprocess.run(["curl", "-fsS", "http://127.0.0.1:5000/v2/"], capture_output=True)
        .returncode == 0,
        "no registry on 127.0.0.1:5000 (scripts/local-registry up)",
    )  # fmt: skip
    result = enroot("import", "-o", str(tmp_path / "x.sqsh"), "docker://localhost:5000#a/b:1")
    assert result.returncode == 35
    assert not (tmp_path / "x.sqsh").exists()


@pytest.mark.e2e
def test_import_writes_through_a_dangling_symlink_like_enroot(
    enroot, tmp_path: Path, registry_images: dict[str, str]
) -> None:
    reference = registry_images["nopython"]
    host, _, rest = reference.partition("/")
    target = tmp_path / "landed-here.sqsh"
    link = tmp_path / "out.sqsh"
    link.symlink_to(target)

    result = enroot("import", "-o", str(link), f"docker://{host}#{rest}", ENROOT_ALLOW_HTTP="yes")

    assert result.returncode == 0, result.stderr
    assert link.is_symlink()
    assert target.is_file() and target.stat().st_size > 0
    assert subprocess.run(["unsquashfs", "-s", str(target)], capture_output=True).returncode == 0


@pytest.mark.e2e
def test_import_passes_max_processors_to_mksquashfs_and_zero_is_refused(
    enroot, tmp_path: Path, registry_images: dict[str, str]
) -> None:
    reference = registry_images["nopython"]
    host, _, rest = reference.partition("/")
    output = tmp_path / "zero.sqsh"
    result = enroot(
        "import", "-o", str(output), f"docker://{host}#{rest}",
        ENROOT_ALLOW_HTTP="yes", ENROOT_MAX_PROCESSORS="0",
    )  # fmt: skip
    assert result.returncode != 0
    assert "-processors should be 1 or larger" in result.stderr


@pytest.fixture
def tiny_image(tmp_path: Path) -> Path:
    need_squashfs_tools()
    need(Path("/bin/busybox").is_file(), "/bin/busybox missing (apt-get install busybox-static)")
    root = busybox_root(tmp_path / "root", None, ["NVIDIA_VISIBLE_DEVICES=all"])
    (root / "etc" / "rc").write_text('"$@"\n')
    return mksquashfs(root, tmp_path / "tiny.sqsh")


def test_create_resolves_links_and_refuses_an_existing_name(
    enroot, tiny_image: Path, tmp_path: Path
) -> None:
    link = tmp_path / "alias.sqsh"
    link.symlink_to(tiny_image)
    assert enroot("create", str(link)).returncode == 0
    assert (tmp_path / "enroot-dirs" / "data" / "tiny" / "bin" / "busybox").is_file()
    again = enroot("create", "--name", "tiny", str(tiny_image))
    assert again.returncode == 1
    assert "[ERROR] File already exists:" in again.stderr
    assert enroot("create", "-f", "--name", "tiny", str(tiny_image)).returncode == 0
    assert enroot("create", "--name", "a/b", str(tiny_image)).returncode == 1
    bad = tmp_path / "bad.sqsh"
    bad.write_bytes(b"not squashfs")
    assert "Invalid image format" in enroot("create", str(bad)).stderr


@pytest.mark.parametrize(
    "mount",
    ["/a b:/c", "/a:/c d", "/a", "/a:/b:none:ro:extra", "/a:", "\t/a:/b"],
)
def test_start_refuses_malformed_mounts(enroot, tiny_image: Path, mount: str) -> None:
    assert enroot("create", "-n", "c", str(tiny_image)).returncode == 0
    result = enroot("start", "--root", "-m", mount, "c", "true")
    assert result.returncode == 1
    assert "[ERROR] Invalid argument" in result.stderr


def test_start_splits_mounts_like_enroot(enroot, standin: Standin, tiny_image: Path) -> None:
    assert enroot("create", "-n", "c", str(tiny_image)).returncode == 0
    src = str(tiny_image.parent)
    result = enroot(
        "start", "--root",
        "-m", f"{src}:/one:x-create=dir,bind,ro",
        "-m", f"{src}:/two:none:x-create=dir,bind",
        "-m", f"{src}:/tmp:rbind",
        "-m", "tmpfs:/four:tmpfs:x-create=dir,mode=700",
        "c", "/bin/ls", "/one",
        NVIDIA_VISIBLE_DEVICES="void",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    mounts = [(m["target"], m["type"], m["options"]) for m in standin.event("start")["mounts"]]
    assert mounts == [
        ("/one", "none", "x-create=dir,bind,ro"),
        ("/two", "none", "x-create=dir,bind"),
        ("/tmp", "none", "rbind"),
        ("/four", "tmpfs", "x-create=dir,mode=700"),
    ]
    assert "tiny.sqsh" in result.stdout


def test_start_as_root_needs_root_flag(enroot, tiny_image: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("runs as root only")
    assert enroot("create", "-n", "c", str(tiny_image)).returncode == 0
    refused = enroot("start", "c", "true", NVIDIA_VISIBLE_DEVICES="void")
    assert refused.returncode == 1
    assert "--root" in refused.stderr
    allowed = enroot(
        "start", "c", "true", NVIDIA_VISIBLE_DEVICES="void", ENROOT_ALLOW_SUPERUSER="y"
    )
    assert allowed.returncode == 0, allowed.stderr


def test_start_runs_the_nvidia_hook_unless_devices_are_void(enroot, tiny_image: Path) -> None:
    # the image's /etc/environment sets NVIDIA_VISIBLE_DEVICES=all
    assert enroot("create", "-n", "c", str(tiny_image)).returncode == 0
    failed = enroot("start", "--root", "c", "true")
    assert failed.returncode == 1
    assert "Command not found: nvidia-container-cli" in failed.stderr
    assert enroot("start", "--root", "c", "true", NVIDIA_VISIBLE_DEVICES="void").returncode == 0


def test_start_passes_a_literal_double_dash_to_the_rc_without_login_shell(
    enroot, tiny_image: Path, tmp_path: Path
) -> None:
    assert enroot("create", "-n", "c", str(tiny_image)).returncode == 0
    rc = tmp_path / "rc"
    rc.write_text('echo "first=$1 count=$#"\n')
    result = enroot(
        "start", "--root", "--rc", str(rc), "c", "--", "a", "b", NVIDIA_VISIBLE_DEVICES="void"
    )
    assert result.stdout == "first=-- count=3\n"
    # an rc that runs "$@" then fails on the `--`, as docs/enroot.md, "`enroot start`", says
    plain = enroot("start", "--root", "c", "--", "true", NVIDIA_VISIBLE_DEVICES="void")
    assert plain.returncode == 127


def test_start_refuses_invalid_environment_and_missing_containers(enroot, tiny_image: Path) -> None:
    assert enroot("create", "-n", "c", str(tiny_image)).returncode == 0
    assert enroot("start", "--root", "-e", "1BAD=x", "c", "true").returncode == 1
    assert "No such file or directory" in enroot("start", "--root", "nothing", "true").stderr


@pytest.mark.parametrize(
    ("missing", "named"),
    [
        (("squashfuse",), "squashfuse"),
        (("fuse-overlayfs",), "fuse-overlayfs"),
        (("squashfuse", "fuse-overlayfs"), "squashfuse"),
    ],
    ids=["squashfuse", "fuse-overlayfs", "both"],
)
def test_start_of_an_image_file_needs_squashfuse_and_fuse_overlayfs(
    enroot, tiny_image: Path, tmp_path: Path, missing: tuple[str, ...], named: str
) -> None:
    """Enroot checks squashfuse, then mountpoint, then fuse-overlayfs, and names the first one
    missing. The node has exactly the FUSE programs not ``missing`` (programs that fail if run:
    the check comes before any mount), whichever of them this machine has installed."""
    system = Path(path_without(tmp_path / "bin", "squashfuse", "fuse-overlayfs"))
    for tool in {"squashfuse", "fuse-overlayfs"} - set(missing):
        (system / tool).write_text("#!/bin/sh\necho 'a FUSE program ran' >&2\nexit 1\n")
        (system / tool).chmod(0o755)
    started = enroot("start", "--root", str(tiny_image), "true", PATH=str(system))
    assert started.returncode == 1
    assert f"Command not found: {named}" in started.stderr
    assert "a FUSE program ran" not in started.stderr


def test_start_of_an_image_file_runs_it_from_a_mounted_overlay(
    enroot, tiny_image: Path, tmp_path: Path
) -> None:
    for tool in ("squashfuse", "fuse-overlayfs"):
        need(shutil.which(tool) is not None, f"{tool} missing (apt-get install {tool})")
    rc = tmp_path / "rc"
    rc.write_text('"$@"\n')
    started = enroot(
        "start", "--root", "--rc", str(rc), str(tiny_image), "/bin/cat", "/proc/self/mountinfo",
        NVIDIA_VISIBLE_DEVICES="void",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    root = started.stdout.splitlines()[0]
    assert root.split()[4] == "/"
    assert root.split(" - ")[1].split()[0] == "fuse.fuse-overlayfs"
    assert list((tmp_path / "enroot-dirs" / "data").iterdir()) == []  # nothing unpacked


def test_remove_needs_force_or_a_yes(enroot, tiny_image: Path, tmp_path: Path) -> None:
    assert enroot("create", "-n", "c", str(tiny_image)).returncode == 0
    rootfs = tmp_path / "enroot-dirs" / "data" / "c"
    assert enroot("remove", "c").returncode == 0  # stdin /dev/null: no
    assert rootfs.is_dir()
    assert enroot("remove", "-f", "c").returncode == 0
    assert not rootfs.exists()
    assert "No such file or directory" in enroot("remove", "-f", "c").stderr
