"""``path NAME`` through the gateway (docs/gateway.md, "Run by name"): the route's answer and the
client's reading of it, the same ``StablePath`` the catalog reader gives where the store is
mounted. The client asks for its own machine's architecture unless one is named, so that a job
on a node gets that node's image whichever way it asks."""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING, Any

from slurm_image.domain.architecture import from_machine
from slurm_image.domain.by_name import StablePath

if TYPE_CHECKING:
    from slurm_image.adapters.gateway_client.remote import RemoteLifecycles
    from slurm_image.composition.api import Lifecycles


def stable_path(lifecycles: Lifecycles, name: str, *, arch: str | None) -> StablePath:
    """The gateway's side: ``name``'s stable path as the requester may see it."""
    return lifecycles.container.catalog_reader().stable_path(name, arch=arch)


def stable_path_from(data: Any) -> StablePath:
    architecture = data["architecture"]
    if architecture is not None and not isinstance(architecture, str):
        raise TypeError("architecture")
    fields = {key: data[key] for key in ("name", "path", "pinned")}
    if not all(isinstance(value, str) for value in fields.values()):
        raise TypeError("path")
    return StablePath(architecture=architecture, **fields)


def remote_stable_path(lifecycles: RemoteLifecycles, name: str, *, arch: str | None) -> StablePath:
    """The client's side: asked of the gateway for ``arch``, else for this machine's."""
    asked = arch if arch is not None else from_machine(platform.machine())
    params = {"arch": asked} if asked is not None else None
    return lifecycles._ask(stable_path_from, "GET", f"/v1/aliases/{name}/path", params=params)
