"""A cosign-signed image through the whole lifecycle on the local clusters: with
``require_signature`` and the site's key, ``import --wait`` of an image cosign 3.1.1 signed
with that key runs the job and publishes it, and ``show --json`` names the key's fingerprint;
the same image re-signed only with another key, an unsigned image and a signature copied from
another digest are refused (exit 10) before anything is staged (docs/design.md, "Image policy
and signatures").

Needs root (chroot for scripts/cosign), the forky root, scripts/local-registry up,
scripts/test-images and the local clusters; the job uses the Enroot stand-in unless the node
has Enroot.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "execution"))

from harness import registry_images  # noqa: F401  (the fixture, registered by import)

from cosign_real import OPEN, copy_manifest, make_cosign, make_repository
from resolve_site import ResolveSite
from slurm_image.domain.signatures import load_public_key
from slurm_image.wire.exit_codes import EXIT_UNSIGNED
from support import install_enroot_standin

pytestmark = [pytest.mark.slurm, pytest.mark.e2e, pytest.mark.full_only]

JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HTTP = ("--allow-http-registry",)


def test_a_signed_image_publishes_with_its_key_and_the_others_stage_nothing(
    world_readable_tmp: Path, local_slurm: Any, request: pytest.FixtureRequest
) -> None:
    cosign = make_cosign()
    request.addfinalizer(cosign.remove)
    repository = make_repository(request.getfixturevalue("registry_images"))
    key = cosign.key_pair("site")
    cosign.key_pair("other")
    signed = repository.ref(repository.client)
    cosign.sign("site", signed, legacy=False, extra=HTTP)
    job_path = JOB_PATH
    if not shutil.which("enroot"):
        job_path = f"{install_enroot_standin(world_readable_tmp / 'bin')}:{JOB_PATH}"
    site_key = world_readable_tmp / "site.pub"
    site_key.write_bytes(key.read_bytes())
    site_key.chmod(0o644)
    site = ResolveSite(
        world_readable_tmp / "site",
        allow_http=True,
        image_build=f'job_path = "{job_path}"\n',
        profile_tail=local_slurm.submitter_table("sbatch")
        + f'\n[policy]\nallowed_registries = ["{OPEN}/slurm-image-signatures"]\n'
        f'require_signature = true\nkeys = ["{site_key}"]\n',
        env={"SLURM_CONF": local_slurm.slurm_conf},
    )
    (world_readable_tmp / "site").chmod(0o755)
    fingerprint = load_public_key(site_key.read_bytes(), str(site_key)).fingerprint

    published = site.json(
        "import", signed, "--name", "signed", "--role", "client", "--wait", "--timeout", "800",
        timeout=900,
    )  # fmt: skip
    assert published["state"] == "PUBLISHED", published
    shown = site.json("show", "signed")
    assert shown["signed_by"]["key_fingerprint"] == fingerprint
    assert shown["signed_by"]["signed_digest"] == repository.client
    listed = site.json("list")
    assert listed["images"][0]["signed_by"]["key_fingerprint"] == fingerprint
    staged_before = site.staged()

    # The serving image: unsigned, then signed only with the other key, then carrying the
    # site key's signature of the client image copied under its own tag.
    unsigned = repository.ref(repository.serving)
    refusals = []
    refusals.append(site.run("import", unsigned, "--name", "s", "--role", "serving", "--wait"))
    cosign.sign("other", unsigned, legacy=False, extra=HTTP)
    refusals.append(site.run("import", unsigned, "--name", "s", "--role", "serving", "--wait"))
    with httpx.Client(timeout=30) as client:
        copy_manifest(
            client,
            f"http://{OPEN}",
            repository.name,
            "sha256-" + repository.client.removeprefix("sha256:"),
            "sha256-" + repository.serving.removeprefix("sha256:"),
        )
    refusals.append(site.run("import", unsigned, "--name", "s", "--role", "serving", "--wait"))
    for done, words in zip(
        refusals,
        ["is not signed", "not signed by a policy key", "signature of another digest"],
        strict=True,
    ):
        assert done.returncode == EXIT_UNSIGNED, done.stderr
        assert done.stderr.startswith(f"slurm-image: error: {repository.serving}: ")
        assert words in done.stderr
    assert site.staged() == staged_before

    outside = site.run(
        "import", f"localhost:5000/slurm-image-test/client@{repository.client}",
        "--name", "o", "--role", "client", "--dry-run",
    )  # fmt: skip
    assert outside.returncode == 2, outside.stderr
    assert "policy.allowed_registries" in outside.stderr
    assert json.loads(site.run("list", "--json").stdout)["images"] == listed["images"]
