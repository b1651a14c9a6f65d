"""The stand-in models architectures as Enroot does (docker.sh, common::debarch): `-a` takes the
uname names only, selects from a Docker manifest list or an OCI index by
`platform.architecture` alone, warns (and goes on) when the chosen config names another
architecture, `enroot digest` (4.0+) prints the chosen manifest's digest, and `start` of a root
of another architecture runs it through the kernel's binfmt_misc handler."""

from __future__ import annotations

import json
import platform
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import Standin, need_squashfs_tools

from clusters import TEST_SQUASH_OPTIONS
from lying_registry import LyingRegistry, digest_of, index_of, lying_registry
from multiarch import MULTI_MACHINES, MultiImage, elf_machine, multi_image, require_machine

pytestmark = [pytest.mark.e2e, pytest.mark.full_only]

REGISTRY = "127.0.0.1:5000"
MULTI_REPOSITORY = "slurm-image-test/multi"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DEBIAN_NAMES = {"x86_64": "amd64", "aarch64": "arm64"}
UNREACHABLE = {"registry-1.docker.io": "127.0.0.1:9", "example.org": "127.0.0.1:9"}


class Enroot:
    """The stand-in alone (real curl on its PATH), with its directories under ``base``."""

    def __init__(self, standin: Standin, base: Path) -> None:
        self.standin = standin
        self.base = base
        sysconf = base / "sysconf"  # no stock hooks or mounts: the image's root alone
        sysconf.mkdir(exist_ok=True)
        self.env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(base),
            "ENROOT_CACHE_PATH": str(base / "cache"),
            "ENROOT_DATA_PATH": str(base / "data"),
            "ENROOT_RUNTIME_PATH": str(base / "runtime"),
            "ENROOT_TEMP_PATH": str(base),
            "ENROOT_MAX_PROCESSORS": "2",
            "ENROOT_ALLOW_HTTP": "yes",
            "ENROOT_SQUASH_OPTIONS": TEST_SQUASH_OPTIONS,
            "ENROOT_LOGIN_SHELL": "no",
            "ENROOT_SYSCONF_PATH": str(sysconf),
        }

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.standin.bin / "enroot"), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )

    def manifests(self) -> list[dict[str, Any]]:
        return [entry for entry in self.standin.records() if entry["event"] == "manifest"]


def uri(digest: str, registry: str = REGISTRY, repository: str = MULTI_REPOSITORY) -> str:
    return f"docker://{registry}#{repository}@{digest}"


@pytest.fixture
def enroot(standin: Standin, tmp_path: Path) -> Enroot:
    standin.configure(hosts=UNREACHABLE)
    return Enroot(standin, tmp_path)


@pytest.fixture(scope="module")
def multi(registry_images: dict[str, str]) -> MultiImage:
    return multi_image(registry_images)


def python_machine(image: Path, work: Path) -> str:
    """The ELF machine of the squashed image's /usr/bin/python3 (a symlink in usr/bin)."""
    target = work / "usr-bin"
    subprocess.run(
        ["unsquashfs", "-no-progress", "-d", str(target), str(image), "usr/bin"],
        check=True,
        capture_output=True,
    )
    python = target / "usr" / "bin" / "python3"
    while python.is_symlink():
        link = Path(python.readlink())
        python = target / "usr" / "bin" / link.name if not link.is_absolute() else target / link
    return elf_machine(python)


@pytest.fixture(scope="module")
def imports(
    multi: MultiImage, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[Enroot, Path, subprocess.CompletedProcess[str]]]]:
    """The real manifest list imported once per architecture by one stand-in."""
    need_squashfs_tools()
    base = tmp_path_factory.mktemp("arch-imports")
    enroot = Enroot(Standin(base / "standin"), base)
    done = {}
    for machine in MULTI_MACHINES:
        output = base / f"{machine}.sqsh"
        result = enroot("import", "-a", machine, "-o", str(output), uri(multi.index_digest))
        done[machine] = (enroot, output, result)
    yield done


# -- the -a grammar ----------------------------------------------------------------------------


@pytest.mark.parametrize("machine", ["x86_64", "aarch64", "ppc64le"])
def test_import_takes_the_uname_names(enroot: Enroot, standin: Standin, machine: str) -> None:
    result = enroot("import", "-a", machine, "-o", "/nonexistent/x.sqsh", "docker://img:1")

    assert standin.event("import")["arch"] == machine
    assert result.returncode == 7  # accepted: then curl cannot connect (nobody serves port 9)


@pytest.mark.parametrize("arch", ["amd64", "arm64", "x86-64", "AARCH64"])
@pytest.mark.parametrize("spelling", ["-a", "--arch", "--arch="])
def test_import_refuses_the_debian_names_as_enroot_does(
    enroot: Enroot, standin: Standin, arch: str, spelling: str
) -> None:
    option = [spelling + arch] if spelling.endswith("=") else [spelling, arch]

    result = enroot("import", *option, "-o", "/nonexistent/x.sqsh", "docker://img:1")

    assert (result.returncode, result.stderr) == (1, f"[ERROR] Unsupported architecture: {arch}\n")
    assert [entry["event"] for entry in standin.records()] == ["call"]  # no registry asked


def test_import_reads_the_uri_before_the_architecture(enroot: Enroot) -> None:
    result = enroot("import", "-a", "arm64", "docker://a#b#c")

    assert result.returncode == 1
    assert result.stderr == "[ERROR] Invalid image reference: docker://a#b#c\n"


@pytest.mark.parametrize("args", [["-a", ""], ["--arch="], ["-a"]])
def test_an_empty_architecture_is_the_usage(enroot: Enroot, args: list[str]) -> None:
    result = enroot("import", *args, "docker://img:1")

    assert result.returncode == 1
    assert "Usage: enroot import" in result.stderr


def test_import_defaults_to_the_machine_it_runs_on(enroot: Enroot, standin: Standin) -> None:
    enroot("import", "-o", "/nonexistent/x.sqsh", "docker://img:1")

    assert standin.event("import")["arch"] == platform.machine()


# -- selection from the real manifest list ----------------------------------------------------


@pytest.mark.parametrize("machine", MULTI_MACHINES)
def test_import_selects_the_manifest_of_the_architecture(
    imports: dict[str, tuple[Enroot, Path, subprocess.CompletedProcess[str]]],
    multi: MultiImage,
    machine: str,
    tmp_path: Path,
) -> None:
    enroot, output, result = imports[machine]

    assert result.returncode == 0, result.stderr
    assert "[WARN]" not in result.stderr
    chosen = [m["url"] for m in enroot.manifests()]
    assert f"/v2/{MULTI_REPOSITORY}/manifests/{multi.digest(machine)}" in [
        url.split(REGISTRY, 1)[1] for url in chosen
    ]
    assert python_machine(output, tmp_path) == machine


def test_the_imports_differ_by_architecture_only_in_their_manifest(
    multi: MultiImage, registry_images: dict[str, str]
) -> None:
    assert multi.digest("x86_64") != multi.digest("aarch64")
    assert multi.index_digest not in (multi.digest("x86_64"), multi.digest("aarch64"))
    assert multi.digest("x86_64") != registry_images["client"].rsplit("@", 1)[1]


def test_start_runs_the_arm64_import_under_binfmt(
    imports: dict[str, tuple[Enroot, Path, subprocess.CompletedProcess[str]]], tmp_path: Path
) -> None:
    require_machine("aarch64")
    enroot, output, result = imports["aarch64"]
    assert result.returncode == 0, result.stderr
    created = enroot("create", "-f", "-n", "arm64", str(output))
    assert created.returncode == 0, created.stderr
    rc = tmp_path / "rc"
    rc.write_text('exec "$@"\n')

    started = enroot(
        "start", "--root", "--rc", str(rc), "arm64",
        "/usr/bin/python3", "-c", "import platform; print(platform.machine())",
    )  # fmt: skip

    assert (started.returncode, started.stdout) == (0, "aarch64\n"), started.stderr


# -- OCI indexes and what the registry serves -------------------------------------------------


@pytest.fixture
def lying(registry_images: dict[str, str]) -> Iterator[LyingRegistry]:
    with lying_registry(repositories=(MULTI_REPOSITORY,)) as registry:
        yield registry


def oci_index(entries: list[tuple[dict[str, str], bytes]]) -> bytes:
    manifests = [
        {"mediaType": OCI_MANIFEST, "size": len(data), "digest": digest_of(data), "platform": where}
        for where, data in entries
    ]
    return json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}).encode()


def per_arch(lying: LyingRegistry, multi: MultiImage, machine: str) -> bytes:
    return lying.manifest(MULTI_REPOSITORY, multi.digest(machine))


@pytest.mark.parametrize("machine", MULTI_MACHINES)
def test_import_selects_from_an_oci_index_by_architecture_alone(
    enroot: Enroot, lying: LyingRegistry, multi: MultiImage, machine: str
) -> None:
    amd64, arm64 = per_arch(lying, multi, "x86_64"), per_arch(lying, multi, "aarch64")
    index = oci_index(
        [
            ({"architecture": "amd64", "os": "linux"}, amd64),
            ({"architecture": "arm64", "os": "windows", "variant": "v6"}, arm64),
            ({"architecture": "arm64", "os": "linux", "variant": "v8"}, amd64),
        ]
    )
    pin = lying.add_manifest(MULTI_REPOSITORY, index, OCI_INDEX)

    result = enroot(
        "import", "-a", machine, "-o", str(enroot.base / "o.sqsh"), uri(pin, lying.address)
    )

    assert result.returncode == 0, result.stderr
    wanted = digest_of(amd64 if machine == "x86_64" else arm64)  # the first arm64 entry
    assert enroot.manifests()[0]["url"].endswith(f"/manifests/{wanted}")
    assert "[WARN]" not in result.stderr


def test_import_warns_when_the_config_names_another_architecture_and_goes_on(
    enroot: Enroot, lying: LyingRegistry, multi: MultiImage
) -> None:
    amd64 = per_arch(lying, multi, "x86_64")
    pin = lying.add_manifest(
        MULTI_REPOSITORY, index_of([("arm64", amd64)])
    )  # an arm64 entry naming the amd64 image

    output = enroot.base / "o.sqsh"
    result = enroot("import", "-a", "aarch64", "-o", str(output), uri(pin, lying.address))

    assert result.returncode == 0, result.stderr
    assert (
        "[WARN] Image architecture doesn't match the requested one: amd64 != arm64\n"
        in result.stderr
    )
    assert output.is_file()


def test_an_index_without_the_architecture_is_enroots_parse_error(
    enroot: Enroot, lying: LyingRegistry, multi: MultiImage
) -> None:
    index = oci_index(
        [({"architecture": "amd64", "os": "linux"}, per_arch(lying, multi, "x86_64"))]
    )
    pin = lying.add_manifest(MULTI_REPOSITORY, index, OCI_INDEX)
    output = enroot.base / "o.sqsh"

    result = enroot("import", "-a", "ppc64le", "-o", str(output), uri(pin, lying.address))

    url = f"http://{lying.address}/v2/{MULTI_REPOSITORY}/manifests/{pin}"
    assert result.returncode == 1
    assert f"[ERROR] Could not parse digest information from {url}\n" in result.stderr
    assert not output.exists()


# -- enroot digest ---------------------------------------------------------------------------------


@pytest.mark.parametrize("machine", MULTI_MACHINES)
def test_digest_prints_the_manifest_of_the_architecture(
    enroot: Enroot, standin: Standin, multi: MultiImage, machine: str
) -> None:
    result = enroot("digest", "-a", machine, uri(multi.index_digest))

    assert (result.returncode, result.stdout) == (0, multi.digest(machine) + "\n"), result.stderr
    assert standin.event("digest")["arch"] == machine


def test_digest_without_an_architecture_is_the_hosts_never_the_index(
    enroot: Enroot, multi: MultiImage
) -> None:
    if platform.machine() not in MULTI_MACHINES:
        pytest.skip(f"multi has no image for {platform.machine()}")

    result = enroot("digest", uri(multi.index_digest))

    assert result.stdout == multi.digest(platform.machine()) + "\n", result.stderr


def test_digest_of_a_plain_manifest_is_its_own(
    enroot: Enroot, registry_images: dict[str, str]
) -> None:
    pin = registry_images["client"].rsplit("@", 1)[1]

    result = enroot("digest", "-a", "aarch64", uri(pin, repository="slurm-image-test/client"))

    assert (result.returncode, result.stdout) == (0, pin + "\n"), result.stderr


def test_digest_refuses_the_debian_names(enroot: Enroot, multi: MultiImage) -> None:
    result = enroot("digest", "-a", "arm64", uri(multi.index_digest))

    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == "[ERROR] Unsupported architecture: arm64\n"


@pytest.mark.parametrize("version", ["3.4.1", "3.5.0"])
def test_there_is_no_digest_command_before_4(
    enroot: Enroot, standin: Standin, multi: MultiImage, version: str
) -> None:
    standin.configure(version=version)

    result = enroot("digest", "-a", "x86_64", uri(multi.index_digest))

    assert (result.returncode, result.stdout) == (1, "")
    assert "Usage: enroot COMMAND" in result.stderr
