"""``publish_per_second``: finished attempts published one after another into a local workspace
through the Python API (locks, verification of the result and of the ``.sqsh``, the records)."""

from __future__ import annotations

import os

from timing import timed
from workloads import Site


def publications(site: Site, count: int) -> tuple[float, list[str]]:
    """Publications per second: finished attempts published one after another; and the
    aliases they published."""
    sqsh = b"hsqs" + bytes(60) + os.urandom(4096)
    names = [f"pub{i:03d}" for i in range(count)]
    ids = [site.publish_finished(name, sqsh) for name in names]

    def publish_all() -> None:
        for lifecycle_id in ids:
            site.publish(lifecycle_id)

    elapsed = timed(publish_all)
    return count / elapsed, names
