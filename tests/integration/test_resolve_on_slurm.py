"""From a tag to a published alias and back, on the local cluster: ``import REG/REPO:TAG
--resolve --wait`` publishes the pin the registry answers for the tag, ``show --json`` carries
the tag; after the tag is pushed again to another image, ``outdated`` names the alias as moved
with the new pin and exits 9.

The tag is a fresh one of the open local registry (scripts/local-registry, scripts/test-images),
made and moved with skopeo; the job uses the Enroot stand-in unless the node has Enroot.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "execution"))

from harness import registry_images  # noqa: F401  (the fixture, registered by import)

from resolve_site import ResolveSite
from support import install_enroot_standin, unavailable

pytestmark = [pytest.mark.slurm, pytest.mark.e2e, pytest.mark.full_only]

JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
REPOSITORY = "localhost:5000/slurm-image-test/resolve-e2e"
"""Each run tags a repository of its own below this name: deleting its manifests at the end
(by digest) removes every tag of that digest in the repository, which must not be another
cluster's run going on at the same time."""


def skopeo_tag(source: str, tag: str) -> None:
    """Point ``tag`` of the local registry at the image ``source`` (REG/REPO[:T]@DIGEST)."""
    name, _, digest = source.partition("@")
    by_digest = f"{name.rsplit(':', 1)[0]}@{digest}"
    subprocess.run(
        ["skopeo", "copy", "--quiet", "--preserve-digests", "--format", "v2s2",
         "--src-tls-verify=false", "--dest-tls-verify=false",
         f"docker://{by_digest}", f"docker://{tag}"],
        check=True, timeout=300,
    )  # fmt: skip


def delete_manifest(repository_path: str, digest: str) -> None:
    request = urllib.request.Request(
        f"http://127.0.0.1:5000/v2/{repository_path}/manifests/{digest}", method="DELETE"
    )
    with contextlib.suppress(OSError):  # best effort: the tag is the test's own
        urllib.request.urlopen(request, timeout=10)


def test_import_resolve_publishes_the_tags_pin_and_outdated_sees_it_move(
    world_readable_tmp: Path, local_slurm: Any, request: pytest.FixtureRequest
) -> None:
    images: dict[str, str] = request.getfixturevalue("registry_images")
    if shutil.which("skopeo") is None:
        unavailable("skopeo missing (apt-get install skopeo)")
    repository = f"{REPOSITORY}-{secrets.token_hex(4)}"
    tag = f"{repository}:e2e"
    client_digest = images["client"].rsplit("@", 1)[1]
    serving_digest = images["serving"].rsplit("@", 1)[1]
    skopeo_tag(images["client"], tag)
    job_path = JOB_PATH
    if not shutil.which("enroot"):
        job_path = f"{install_enroot_standin(world_readable_tmp / 'bin')}:{JOB_PATH}"
    site = ResolveSite(
        world_readable_tmp / "site",
        allow_http=True,
        image_build=f'job_path = "{job_path}"\n',
        profile_tail=local_slurm.submitter_table("sbatch"),
        env={"SLURM_CONF": local_slurm.slurm_conf},
    )
    (world_readable_tmp / "site").chmod(0o755)
    try:
        published = site.json(
            "import", tag, "--resolve", "--name", "tagged", "--role", "client",
            "--wait", "--timeout", "800",
            timeout=900,
        )  # fmt: skip
        assert published["state"] == "PUBLISHED" and published["from_store"] is False
        assert published["source"] == f"{tag}@{client_digest}"
        assert published["source_digest"] == client_digest

        shown = site.json("show", "tagged")
        assert shown["resolved_from"]["tag"] == tag
        assert shown["resolved_from"]["digest"] == client_digest
        plan = json.loads(
            (
                site.workspace
                / "images"
                / ".tmp"
                / "jobs"
                / published["lifecycle_id"]
                / "plan.json"
            ).read_text()
        )
        assert plan["schema_version"] == 3 and plan["request"]["resolved_from"]["tag"] == tag

        current = site.run("outdated", "--json")
        assert current.returncode == 0, current.stderr
        assert [entry["state"] for entry in json.loads(current.stdout)["images"]] == ["current"]

        skopeo_tag(images["serving"], tag)  # the tag now names another image

        moved = site.run("outdated", "--json")
        assert moved.returncode == 9, moved.stderr
        (entry,) = json.loads(moved.stdout)["images"]
        assert (entry["name"], entry["state"]) == ("tagged", "moved")
        assert entry["new_pin"] == f"{tag}@{serving_digest}"
        assert entry["pinned"] == f"{tag}@{client_digest}"
        human = site.run("outdated", "tagged")
        assert human.returncode == 9
        assert "tagged" in human.stdout and "moved" in human.stdout
        assert f"{tag}@{serving_digest}" in human.stdout
    finally:
        repository_path = repository.split("/", 1)[1]
        for digest in (client_digest, serving_digest):
            delete_manifest(repository_path, digest)
