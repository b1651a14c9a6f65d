"""Imports from the authenticated registry of scripts/local-registry (htpasswd over TLS, HTTP/2):
with the staged credentials they succeed, with wrong or none they fail as a job with a clear
line, and the secret is found nowhere but where it was staged, and not even there afterwards."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
from pathlib import Path

import pytest
from harness import AuthRegistry, Job, JobFactory, Result, Standin

from slurm_image.domain.credentials import RegistryCredentials


def credentials(registry: AuthRegistry, password: str | None = None) -> RegistryCredentials:
    return RegistryCredentials(registry.host, registry.user, password or registry.password)


def secrets(registry: AuthRegistry, password: str) -> list[bytes]:
    """The password, and the Basic header value Enroot keeps in its token file."""
    basic = base64.b64encode(f"{registry.user}:{password}".encode())
    return [password.encode(), basic]


def places_holding(secret: bytes, roots: list[Path], result: Result) -> list[str]:
    """Every file below ``roots``, the job's output, and every process's argv and environment."""
    found = []
    for root in roots:
        for directory, _, files in os.walk(root):
            for name in files:
                path = Path(directory, name)
                if path.is_symlink() or not path.is_file():
                    continue
                if secret in path.read_bytes():
                    found.append(str(path))
    if secret.decode() in result.stdout + result.stderr:
        found.append("the job's output")
    listing = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, check=True)
    if secret in listing.stdout:
        found.append("the process list")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        for part in ("cmdline", "environ"):
            try:
                if secret in (proc / part).read_bytes():
                    found.append(f"/proc/{proc.name}/{part}")
            except OSError:
                pass
    return found


def staged_digest_seen_during_import(standin: Standin, tmp_path: Path) -> Path:
    seen = tmp_path / "seen-during-import"
    standin.configure(
        hooks={
            "import": f'sha256sum "$ENROOT_CONFIG_PATH/.credentials" >{seen}; '
            f'ls "$ENROOT_CACHE_PATH"/.tokens.* >>{seen}'
        }
    )
    return seen


def import_job(
    make_job: JobFactory,
    standin: Standin,
    registry: AuthRegistry,
    image: str,
    staged: RegistryCredentials | None,
    version: str = "4.1.2",
) -> Job:
    standin.configure(version=version, ca_file=str(registry.ca_file))
    return make_job(
        operation="import_oci", role="client", source=registry.images[image], credentials=staged
    )


@pytest.mark.e2e
def test_import_with_credentials_succeeds_and_leaves_no_secret_behind(
    make_job: JobFactory, standin: Standin, auth_registry: AuthRegistry, tmp_path: Path
) -> None:
    seen = staged_digest_seen_during_import(standin, tmp_path)
    staged = credentials(auth_registry)
    job = import_job(make_job, standin, auth_registry, "client", staged)

    result = job.run()

    assert result.returncode == 0, result.stderr
    assert standin.commands() == ["version", "import", "create", "start", "remove"]
    assert Path(job.paths.candidate).is_file()
    auth = standin.event("auth")  # the registry host matched without its port, over HTTP/1.1
    assert (auth["host"], auth["login"], auth["http2"]) == ("127.0.0.1", auth_registry.user, False)
    during = seen.read_text()
    assert hashlib.sha256(staged.netrc_bytes()).hexdigest() in during
    assert f"{auth_registry.address}." in during  # Enroot's token file existed during the import
    assert f"importing with the credentials staged for {auth_registry.host}" in result.stderr
    assert not (Path(job.paths.enroot_config) / ".credentials").exists()
    assert job.leftover_scratch() == []
    for secret in secrets(auth_registry, auth_registry.password):
        assert places_holding(secret, [tmp_path, job.tmp], result) == []


@pytest.mark.parametrize("version", ["3.4.1", "3.5.0", "4.0.0"])
@pytest.mark.e2e
def test_import_with_credentials_works_on_every_supported_enroot(
    make_job: JobFactory, standin: Standin, auth_registry: AuthRegistry, version: str
) -> None:
    job = import_job(
        make_job, standin, auth_registry, "nopython", credentials(auth_registry), version
    )

    result = job.run()

    # imported; then the image without Python is refused by the inspection
    assert result.returncode == 69, result.stderr
    assert standin.commands() == ["version", "import", "create", "start", "remove"]
    assert Path(job.paths.candidate).is_file()


@pytest.mark.e2e
def test_wrong_password_fails_the_job_with_a_line_that_names_the_credentials(
    make_job: JobFactory, standin: Standin, auth_registry: AuthRegistry, tmp_path: Path
) -> None:
    canary = "canary-" + os.urandom(12).hex()
    staged = credentials(auth_registry, canary)
    job = import_job(make_job, standin, auth_registry, "nopython", staged)

    result = job.run()

    assert result.returncode == 1
    assert (
        f"enroot import from {auth_registry.address} failed with status 1, with the credentials"
        f" staged for {auth_registry.host}" in result.stderr
    )
    assert standin.commands() == ["version", "import"]
    assert standin.event("auth")["login"] == auth_registry.user  # it read the staged entry
    assert not Path(job.paths.partial).exists()
    assert not Path(job.paths.candidate).exists()
    assert not (Path(job.paths.enroot_config) / ".credentials").exists()
    assert job.leftover_scratch() == []
    for secret in secrets(auth_registry, canary):
        assert places_holding(secret, [tmp_path, job.tmp], result) == []


@pytest.mark.e2e
def test_no_credentials_fail_the_job_with_a_line_that_says_none_were_used(
    make_job: JobFactory, standin: Standin, auth_registry: AuthRegistry
) -> None:
    job = import_job(make_job, standin, auth_registry, "nopython", None)

    result = job.run()

    assert result.returncode == 1
    assert f"no credentials for {auth_registry.address}: importing anonymously" in result.stderr
    assert (
        f"enroot import from {auth_registry.address} failed with status 1, without credentials"
        in result.stderr
    )
    assert standin.event("auth")["login"] is None
    assert not Path(job.paths.candidate).exists()
    assert job.leftover_scratch() == []


@pytest.mark.e2e
def test_the_canary_search_finds_a_secret_left_in_the_workspace(
    make_job: JobFactory, standin: Standin, auth_registry: AuthRegistry, tmp_path: Path
) -> None:
    # the search itself can fail: a staged file the job never removed is found
    canary = "canary-" + os.urandom(12).hex()
    standin.configure(version="4.1.2")
    job = make_job(operation="inspect_sqsh", role="client", source=str(tmp_path / "none.sqsh"))
    leaked = job.stage_credentials(f"machine x login y password {canary}\n".encode())
    result = Result(0, "", "")

    assert places_holding(canary.encode(), [tmp_path, job.tmp], result) == [str(leaked)]


def test_credentials_staged_for_an_inspect_plan_stop_the_job(
    make_job: JobFactory, standin: Standin, image
) -> None:
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))
    job.stage_credentials(b"machine x login y password z\n")

    result = job.run()

    assert result.returncode == 0, result.stderr  # an inspect never reads them: no import step
    assert not (Path(job.paths.enroot_config) / ".credentials").exists()  # the trap removed them


UNREACHABLE = "127.0.0.1:9/team/app:1@sha256:" + "a" * 64


def test_credentials_the_plan_does_not_name_stop_the_import_with_70(
    make_job: JobFactory, standin: Standin
) -> None:
    job = make_job(operation="import_oci", role="client", source=UNREACHABLE)
    planted = job.stage_credentials(b"machine 127.0.0.1 login y password z\n")

    result = job.run()

    assert result.returncode == 70, result.stderr
    assert standin.commands() == ["version"]
    assert not planted.exists()


@pytest.mark.parametrize("how", ["missing", "symlink"])
def test_credentials_the_plan_names_but_that_are_not_a_file_stop_the_import_with_70(
    make_job: JobFactory, standin: Standin, tmp_path: Path, how: str
) -> None:
    job = make_job(
        operation="import_oci",
        role="client",
        source=UNREACHABLE,
        credentials=RegistryCredentials("127.0.0.1", "u", "p"),
    )
    staged = Path(job.paths.enroot_config) / ".credentials"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(staged.read_bytes())
    staged.unlink()
    if how == "symlink":
        staged.symlink_to(elsewhere)

    result = job.run()

    assert result.returncode == 70, result.stderr
    assert standin.commands() == ["version"]
    assert elsewhere.exists()  # the trap removed the link, never its target


def test_a_curlrc_planted_in_the_jobs_home_stops_the_import_with_70(
    make_job: JobFactory, standin: Standin, tmp_path: Path
) -> None:
    job = make_job(operation="import_oci", role="client", source=UNREACHABLE)
    home = Path(job.paths.home)
    home.mkdir(mode=0o700)
    (home / ".curlrc").symlink_to(tmp_path / "target")

    result = job.run()

    assert result.returncode == 70, result.stderr
    assert not (tmp_path / "target").exists()
    assert standin.commands() == ["version"]


def test_an_import_without_credentials_says_so_and_writes_the_http_1_1_curlrc(
    make_job: JobFactory, standin: Standin
) -> None:
    job = make_job(operation="import_oci", role="client", source=UNREACHABLE)

    result = job.run()

    assert result.returncode == 7
    assert "no credentials for 127.0.0.1:9: importing anonymously" in result.stderr
    assert (Path(job.paths.home) / ".curlrc").read_text() == "--http1.1\n"
    assert standin.calls()[1]["env"]["HOME"] == job.paths.home
