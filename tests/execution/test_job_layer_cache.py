"""The layer cache kept between one user's imports (README, "The layer cache"): reused layers are
never downloaded again, a cached image config is verified before Enroot reads it, the directory
is refused when another user could change it (exit 84), and Enroot's registry tokens never
outlive the job."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import HTTP, AuthRegistry, Job, JobFactory, Result, Standin

from lying_registry import (
    NOPYTHON,
    LyingRegistry,
    blob_gets,
    derived_image,
    digest_of,
    lying_registry,
    pinned,
    with_config,
)
from slurm_image.domain.credentials import RegistryCredentials

pytestmark = pytest.mark.e2e

OTHER_UID = 4242


@pytest.fixture
def registry(registry_images: dict[str, str]) -> Iterator[LyingRegistry]:
    with lying_registry() as lying:
        yield lying


def source(registry: LyingRegistry, digest: str) -> str:
    return f"{registry.address}/{NOPYTHON}:1@{digest}"


def downloads(standin: Standin) -> list[str]:
    return [entry["digest"] for entry in standin.records() if entry["event"] == "download"]


def import_job(make_job: JobFactory, reference: str, **kwargs: object) -> Job:
    return make_job(
        operation="import_oci", role="client", source=reference, environment=HTTP, **kwargs
    )


def imported(job: Job, result: Result) -> None:
    assert result.returncode == 69, result.stderr  # imported; the image has no Python
    assert Path(job.paths.candidate).is_file()


def import_nopython(
    make_job: JobFactory, registry: LyingRegistry, registry_images: dict[str, str]
) -> tuple[str, Job]:
    """The pinned nopython image imported once through the lying registry: its pin and job."""
    pin = pinned(registry_images, "nopython")
    job = import_job(make_job, source(registry, pin))
    imported(job, job.run())
    return pin, job


def default_cache(job: Job) -> Path:
    return job.workspace / "images" / "layer-cache"


def test_a_second_import_downloads_only_the_layer_it_does_not_share(
    make_job: JobFactory, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    pin, first = import_nopython(make_job, registry, registry_images)
    shared = json.loads(registry.manifest(NOPYTHON, pin))["layers"]
    cache = default_cache(first)
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    for layer in shared:
        assert (cache / layer["digest"].removeprefix("sha256:")).is_file()
    derived, new_layer, new_config = derived_image(registry, NOPYTHON, pin, "second")
    first.standin.log.write_text("")
    registry.requests.clear()

    second = import_job(make_job, source(registry, derived))
    result = second.run()

    imported(second, result)
    assert sorted(downloads(second.standin)) == sorted([new_layer, new_config])
    assert sorted(blob_gets(registry)) == sorted([new_layer, new_config])
    assert f"layer cache: {cache}" in result.stderr
    chain = json.loads((Path(second.paths.job_dir) / "chain.json").read_bytes())
    assert chain["config"] == new_config


def test_an_import_of_a_cached_image_downloads_no_blob_and_verifies_the_cached_config(
    make_job: JobFactory, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    pin, first = import_nopython(make_job, registry, registry_images)
    config = json.loads(registry.manifest(NOPYTHON, pin))["config"]["digest"]
    first.standin.log.write_text("")
    registry.requests.clear()

    second = import_job(make_job, source(registry, pin))
    result = second.run()

    imported(second, result)
    assert downloads(second.standin) == []
    assert blob_gets(registry) == []
    chain = json.loads((Path(second.paths.job_dir) / "chain.json").read_bytes())
    assert chain == {"pinned": pin, "manifest": pin, "config": config}


def test_a_cached_config_that_is_not_the_digest_it_is_named_by_fails_the_job_with_79(
    make_job: JobFactory, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    pin, first = import_nopython(make_job, registry, registry_images)
    config = json.loads(registry.manifest(NOPYTHON, pin))["config"]["digest"]
    cached = default_cache(first) / config.removeprefix("sha256:")
    swapped = json.dumps({"architecture": "amd64", "config": {"WorkingDir": "/../../x"}})
    compressed = subprocess.run(
        ["zstd", "-q", "-c"], input=swapped.encode(), capture_output=True, check=True
    )
    cached.write_bytes(compressed.stdout)  # as Enroot stores a config

    second = import_job(make_job, source(registry, pin))
    result = second.run()

    assert result.returncode == 79, result.stderr
    found = digest_of(swapped.encode())
    assert f"the layer cache holds the image config {config} with {found}" in result.stderr
    assert not Path(second.paths.candidate).exists()


def test_a_cached_config_whose_working_dir_leads_out_of_the_root_fails_the_job_with_79(
    make_job: JobFactory,
    registry: LyingRegistry,
    registry_images: dict[str, str],
    world_readable_tmp: Path,
) -> None:
    pin = pinned(registry_images, "nopython")
    config = registry.config(NOPYTHON, pin)
    escape = world_readable_tmp / "escaped"
    config["config"]["WorkingDir"] = f"/../../../../../../..{escape}"
    hostile = json.dumps(config).encode()
    manifest = with_config(registry.manifest(NOPYTHON, pin), hostile)
    digest = registry.add_manifest(NOPYTHON, manifest)
    job = import_job(make_job, source(registry, digest))
    cache = default_cache(job)
    cache.mkdir(parents=True, mode=0o700)
    compressed = subprocess.run(
        ["zstd", "-q", "-c"], input=hostile, capture_output=True, check=True
    )
    (cache / digest_of(hostile).removeprefix("sha256:")).write_bytes(compressed.stdout)

    result = job.run()

    assert result.returncode == 79, result.stderr
    assert f"the image config {digest_of(hostile)} names WorkingDir" in result.stderr
    assert not escape.exists()
    assert not Path(job.paths.candidate).exists()


def test_the_cached_blobs_an_import_uses_are_marked_used_before_enroot_reads_them(
    make_job: JobFactory, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    # gc takes blobs by when they were last used (the later of atime and mtime): an old blob
    # that Enroot found in the cache must not look unused until Enroot has read it
    pin, first = import_nopython(make_job, registry, registry_images)
    cache = default_cache(first)
    month_ago = time.time() - 30 * 86400
    for blob in cache.iterdir():
        if blob.is_file():
            os.utime(blob, (month_ago, month_ago))
    seen = first.standin.bin.parent / "cache-when-downloaded"
    first.standin.configure(
        hooks={
            "import_downloaded": f'find "$ENROOT_CACHE_PATH" -maxdepth 1 -type f'
            f" -printf '%f %A@ %T@\\n' >{seen}"
        }
    )
    manifest = json.loads(registry.manifest(NOPYTHON, pin))
    used = [blob["digest"].removeprefix("sha256:") for blob in manifest["layers"]]
    used.append(manifest["config"]["digest"].removeprefix("sha256:"))
    started = time.time()

    second = import_job(make_job, source(registry, pin))
    imported(second, second.run())

    times = {
        name: max(float(atime), float(mtime))
        for name, atime, mtime in (line.split() for line in seen.read_text().splitlines())
    }
    assert sorted(times) == sorted(used)  # all of them cached: nothing was downloaded
    for digest in used:
        assert times[digest] >= started - 1, (digest, times[digest])


def test_with_the_cache_off_the_import_uses_its_scratch_and_keeps_nothing(
    make_job: JobFactory, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    reference = source(registry, pinned(registry_images, "nopython"))
    job = import_job(make_job, reference, layer_cache=False)

    result = job.run()

    imported(job, result)
    assert "layer cache: off" in result.stderr
    assert not default_cache(job).exists()
    assert job.leftover_scratch() == []


def test_a_cache_path_of_the_profile_is_created_0700_with_its_missing_parents(
    make_job: JobFactory,
    registry: LyingRegistry,
    registry_images: dict[str, str],
    world_readable_tmp: Path,
) -> None:
    cache = world_readable_tmp / "node-local" / "cache"
    reference = source(registry, pinned(registry_images, "nopython"))
    job = import_job(make_job, reference, layer_cache=str(cache))

    imported(job, job.run())

    assert oct(cache.stat().st_mode & 0o7777) == "0o700"
    assert oct(cache.parent.stat().st_mode & 0o7777) == "0o700"
    assert any(len(entry.name) == 64 for entry in cache.iterdir())
    assert not default_cache(job).exists()


# -- refusals (exit 84): nothing is imported ----------------------------------------------------


def refused(job: Job, result: Result, what: str) -> None:
    assert result.returncode == 84, result.stderr
    assert "the layer cache" in result.stderr and what in result.stderr, result.stderr
    assert "import" not in job.standin.commands()
    assert not Path(job.paths.candidate).exists()
    assert job.leftover_scratch() == []


@pytest.fixture
def elsewhere(world_readable_tmp: Path) -> Path:
    path = world_readable_tmp / "caches"
    path.mkdir(mode=0o755)
    return path


def test_a_cache_writable_by_group_or_others_is_refused_even_with_the_sticky_bit(
    make_job: JobFactory, registry_images: dict[str, str], elsewhere: Path
) -> None:
    cache = elsewhere / "cache"
    cache.mkdir()
    cache.chmod(0o1770)
    job = import_job(make_job, registry_images["nopython"], layer_cache=str(cache))

    refused(job, job.run(), f"{cache} is writable by group or others")


def test_a_cache_owned_by_another_uid_is_refused(
    make_job: JobFactory, registry_images: dict[str, str], elsewhere: Path
) -> None:
    cache = elsewhere / "cache"
    cache.mkdir(mode=0o700)
    os.chown(cache, OTHER_UID, OTHER_UID)
    job = import_job(make_job, registry_images["nopython"], layer_cache=str(cache))

    refused(job, job.run(), f"{cache} is owned by uid {OTHER_UID}, not by uid {os.geteuid()}")


def test_a_parent_that_is_a_symlink_of_another_user_is_refused(
    make_job: JobFactory, registry_images: dict[str, str], elsewhere: Path
) -> None:
    real = elsewhere / "real"
    (real / "cache").mkdir(parents=True, mode=0o700)
    link = elsewhere / "link"
    link.symlink_to(real)
    os.lchown(link, OTHER_UID, OTHER_UID)
    job = import_job(make_job, registry_images["nopython"], layer_cache=str(link / "cache"))

    refused(job, job.run(), f"{link} is a symlink owned by uid {OTHER_UID}")


def test_a_parent_another_user_may_write_without_the_sticky_bit_is_refused(
    make_job: JobFactory, registry_images: dict[str, str], elsewhere: Path
) -> None:
    parent = elsewhere / "open"
    parent.mkdir()
    parent.chmod(0o777)
    job = import_job(make_job, registry_images["nopython"], layer_cache=str(parent / "cache"))

    refused(job, job.run(), f"{parent} is writable by group or others without the sticky bit")
    assert not (parent / "cache").exists()


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_something_other_than_a_directory_in_the_caches_place_is_refused(
    make_job: JobFactory, registry_images: dict[str, str], elsewhere: Path, kind: str
) -> None:
    cache = elsewhere / "cache"
    if kind == "file":
        cache.write_text("")
        what = f"{cache} is a regular empty file, not a directory"
    else:
        (elsewhere / "target").mkdir(mode=0o700)
        cache.symlink_to(elsewhere / "target")
        what = f"{cache} is a symbolic link, not a directory"
    job = import_job(make_job, registry_images["nopython"], layer_cache=str(cache))

    refused(job, job.run(), what)


# -- registry tokens never outlive the job ------------------------------------------------------


def tokens(cache: Path) -> list[str]:
    return sorted(
        str(path.relative_to(cache)) for path in cache.glob(".tokens.*/*") if path.is_file()
    )


def auth_import(make_job: JobFactory, standin: Standin, registry: AuthRegistry) -> Job:
    standin.configure(ca_file=str(registry.ca_file))
    staged = RegistryCredentials(registry.host, registry.user, registry.password)
    return make_job(
        operation="import_oci",
        role="client",
        source=registry.images["nopython"],
        credentials=staged,
    )


def test_an_import_killed_before_its_own_cleanup_leaves_no_token(
    make_job: JobFactory, standin: Standin, auth_registry: AuthRegistry
) -> None:
    # Enroot removes its tokens when it exits; killed, it cannot
    seen = standin.bin.parent / "tokens-during-import"
    standin.configure(
        hooks={"import": f'ls "$ENROOT_CACHE_PATH"/.tokens.*/ >{seen}; kill -KILL "$PPID"'}
    )
    job = auth_import(make_job, standin, auth_registry)

    result = job.run()

    assert result.returncode == 137, result.stderr
    assert auth_registry.address.split(":")[0] in seen.read_text()  # a token existed
    assert tokens(default_cache(job)) == []


def test_a_job_killed_during_its_import_leaves_no_token(
    make_job: JobFactory, standin: Standin, auth_registry: AuthRegistry
) -> None:
    ready = standin.bin.parent / "import-running"
    standin.configure(hooks={"import": f": >{ready}; sleep 60"})
    job = auth_import(make_job, standin, auth_registry)
    spool = job.tmp / "spool" / f"job{job.job_id}" / "slurm_script"
    spool.parent.mkdir(parents=True, mode=0o700)
    spool.write_text(job.script)
    spool.chmod(0o500)
    process = subprocess.Popen(
        [str(spool)],
        cwd=job.job_dir,
        env=job.environment(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    for _ in range(600):
        if ready.exists() or process.poll() is not None:
            break
        time.sleep(0.1)
    assert ready.exists(), process.communicate()[1]
    assert tokens(default_cache(job)) != []  # the import holds its token now

    os.killpg(process.pid, signal.SIGTERM)  # every process of the job, as scancel signals them
    process.wait(timeout=120)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # whatever ignored TERM, as Slurm's KillWait
    _, stderr = process.communicate(timeout=60)

    assert process.returncode == 143, stderr.decode()
    assert tokens(default_cache(job)) == []


def test_stale_tokens_go_at_the_start_and_a_peers_fresh_one_stays(
    make_job: JobFactory, standin: Standin, auth_registry: AuthRegistry
) -> None:
    job = auth_import(make_job, standin, auth_registry)
    directory = default_cache(job) / f".tokens.{os.geteuid()}"
    directory.mkdir(parents=True, mode=0o700)
    stale = directory / "registry.example.org.12345"
    stale.write_text('header "Authorization: Basic c3RhbGU="')
    two_hours_ago = time.time() - 2 * 3600
    os.utime(stale, (two_hours_ago, two_hours_ago))
    peer = directory / "registry.example.org.12346"
    peer.write_text('header "Authorization: Basic cGVlcg=="')

    result = job.run()

    assert result.returncode == 69, result.stderr  # imported; the image has no Python
    assert tokens(default_cache(job)) == [f".tokens.{os.geteuid()}/{peer.name}"]


def test_two_imports_sharing_the_cache_at_once_both_succeed_and_leave_no_token(
    make_job: JobFactory, standin: Standin, auth_registry: AuthRegistry
) -> None:
    jobs = [auth_import(make_job, standin, auth_registry) for _ in range(2)]
    results: list[Result] = []
    threads = [threading.Thread(target=lambda job=job: results.append(job.run())) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [result.returncode for result in results] == [69, 69], [r.stderr for r in results]
    for job in jobs:
        assert Path(job.paths.candidate).is_file()
    cache = default_cache(jobs[0])
    assert tokens(cache) == []
    downloads = [
        path.name for path in cache.iterdir() if re.fullmatch(r"[0-9a-f]{64}\..*", path.name)
    ]
    assert downloads == []  # every temporary name was moved into place or removed
