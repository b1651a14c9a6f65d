"""The stand-in authenticates like Enroot (docs/enroot.md, "Credentials"): netrc matched by host
without port, the HTTP/2 defect, the token file, and the silent exit 1 of 3.5.0 and 4.x on an auth
failure."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from harness import AuthRegistry, Standin

pytestmark = pytest.mark.e2e


class Enroot:
    def __init__(self, standin: Standin, registry: AuthRegistry, tmp_path: Path) -> None:
        self.standin = standin
        self.registry = registry
        self.home = tmp_path / "home"
        self.config = tmp_path / "config"
        self.cache = tmp_path / "cache"
        for directory in (self.home, self.config):
            directory.mkdir(mode=0o700)
        self.output = tmp_path / "out.sqsh"
        self.env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(self.home),
            "ENROOT_CONFIG_PATH": str(self.config),
            "ENROOT_CACHE_PATH": str(self.cache),
            "ENROOT_DATA_PATH": str(tmp_path / "data"),
            "ENROOT_RUNTIME_PATH": str(tmp_path / "runtime"),
            "ENROOT_TEMP_PATH": str(tmp_path),
            "ENROOT_MAX_PROCESSORS": "2",
        }
        standin.configure(ca_file=str(registry.ca_file))

    def netrc(self, machine: str, password: str | None = None) -> None:
        line = f"machine {machine} login {self.registry.user} password "
        (self.config / ".credentials").write_text(line + (password or self.registry.password))

    def curlrc(self) -> None:
        (self.home / ".curlrc").write_text("--http1.1\n")

    def import_(self, version: str = "4.1.2") -> subprocess.CompletedProcess[str]:
        self.standin.configure(version=version)
        reference = self.registry.images["nopython"]
        host, _, rest = reference.partition("/")
        name, _, digest = rest.partition("@")
        uri = f"docker://{host}#{name.rsplit(':', 1)[0]}:{digest}"
        return subprocess.run(
            [str(self.standin.bin / "enroot"), "import", "-o", str(self.output), uri],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def token_files(self) -> list[Path]:
        return sorted(self.cache.glob(".tokens.*/*"))


@pytest.fixture
def enroot(standin: Standin, auth_registry: AuthRegistry, tmp_path: Path) -> Enroot:
    return Enroot(standin, auth_registry, tmp_path)


@pytest.mark.parametrize("version", ["3.4.1", "3.5.0", "4.1.2"])
def test_credentials_over_http_1_1_import(enroot: Enroot, tmp_path: Path, version: str) -> None:
    enroot.netrc("127.0.0.1")
    enroot.curlrc()
    seen = tmp_path / "tokens-during-import"
    enroot.standin.configure(hooks={"import": f'cat "$ENROOT_CACHE_PATH"/.tokens.*/* >{seen}'})

    result = enroot.import_(version)

    assert result.returncode == 0, result.stderr
    assert enroot.output.is_file()
    # written during the import, as Enroot writes it: a curl config line passed with -K
    assert seen.read_text().startswith('header "Authorization: Basic ')
    assert enroot.token_files() == []  # and removed when it exited
    assert enroot.standin.event("auth")["http2"] is False


@pytest.mark.parametrize("version", ["3.5.0", "4.1.2"])
def test_credentials_over_http_2_are_lost_and_the_import_exits_1_silently(
    enroot: Enroot, version: str
) -> None:
    enroot.netrc("127.0.0.1")

    result = enroot.import_(version)

    assert result.returncode == 1
    assert "[ERROR]" not in result.stderr and "401" not in result.stderr
    assert f"Authenticating with user: {enroot.registry.user}" in result.stderr
    assert enroot.standin.event("auth")["http2"] is True
    assert not enroot.output.exists()


def test_enroot_3_4_1_prints_the_401(enroot: Enroot) -> None:
    enroot.netrc("127.0.0.1")
    result = enroot.import_("3.4.1")
    assert result.returncode == 1
    assert "returned error: 401" in result.stderr


def test_an_entry_written_with_the_port_is_never_matched(enroot: Enroot) -> None:
    enroot.netrc(enroot.registry.address)
    enroot.curlrc()

    result = enroot.import_()

    assert result.returncode == 1
    assert enroot.standin.event("auth")["login"] is None  # anonymous
    assert "Authenticating" not in result.stderr


def test_a_wrong_password_fails_and_leaves_no_token_file(enroot: Enroot) -> None:
    enroot.netrc("127.0.0.1", "not-the-password")
    enroot.curlrc()

    result = enroot.import_()

    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("[INFO]")  # no error line at all
    assert enroot.token_files() == []
    assert not enroot.output.exists()
