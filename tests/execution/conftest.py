"""Fixtures of the execution tests; they live in harness.py (a module name of its own, so
``from harness import ...`` never meets the repository's top-level conftest)."""

from harness import (  # noqa: F401
    auth_registry,
    bookworm_image,
    busybox_images,
    image,
    make_job,
    registry_images,
    standin,
)
