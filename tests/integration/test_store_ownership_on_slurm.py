"""Published means unchangeable by others, on the local cluster (README, Threat model): a
``.sqsh`` of another user's is refused before any job, and one inspected and published in
place that later becomes another user's, who rewrites it, is no longer resolved by ``show``.

Needs root (to give a file to another uid), the local cluster, the local registry with the test
images and squashfs-tools; the jobs use the Enroot stand-in unless the node has Enroot.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_publish_on_slurm import Site, images  # noqa: F401 (the registry's test images)

from support import unavailable

pytestmark = [pytest.mark.slurm, pytest.mark.full_only]

OTHER_UID = 4242


def test_a_foreign_sqsh_is_refused_and_one_given_away_after_publication_is_not_resolved(
    world_readable_tmp: Path,
    local_slurm: Any,
    images: dict[str, str],  # noqa: F811
) -> None:
    if os.geteuid() != 0:
        unavailable("needs root to give a file to another uid")
    site = Site(world_readable_tmp, "sbatch", local_slurm)
    stored = site.json(
        "import",
        images["client"],
        "--name",
        "app",
        "--role",
        "client",
        "--wait",
        "--timeout",
        "800",
    )
    shared = world_readable_tmp / "shared"
    shared.mkdir(mode=0o755)
    theirs, mine = shared / "theirs.sqsh", shared / "mine.sqsh"
    for copy in (theirs, mine):
        shutil.copy(stored["path"], copy)
        copy.chmod(0o644)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    jobs = sorted((site.workspace / "images" / ".tmp" / "jobs").iterdir())

    refused = site.run("inspect", str(theirs), "--name", "theirs", "--role", "client")

    assert refused.returncode == 2, refused.stderr
    assert f"source: {theirs} is owned by uid {OTHER_UID}" in refused.stderr
    assert sorted((site.workspace / "images" / ".tmp" / "jobs").iterdir()) == jobs

    inspected = site.json(
        "inspect", str(mine), "--name", "mine", "--role", "client", "--wait", "--timeout", "800"
    )
    assert inspected["state"] == "PUBLISHED" and inspected["path"] == str(mine)
    assert site.json("show", "mine")["path"] == str(mine)
    os.chown(mine, OTHER_UID, OTHER_UID)
    with mine.open("r+b") as handle:
        handle.write(b"rewritten by its new owner")

    for command in (("show", "mine"), ("show", "mine", "--verify")):
        shown = site.run(*command)
        assert shown.returncode == 5, (command, shown.stderr)
        assert shown.stdout == ""
        assert f"{mine} is owned by uid {OTHER_UID}" in shown.stderr
    assert [image["name"] for image in site.json("list")["images"]] == ["app"]
