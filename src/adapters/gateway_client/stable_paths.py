"""``path NAME`` through the gateway (docs/gateway.md, "Run by name"): the client's reading of
the route's answer (``wire.shapes.stable_path_from``), the same ``StablePath`` the catalog
reader gives where the store is mounted. The client asks for its own machine's architecture
unless one is named, so that a job on a node gets that node's image whichever way it asks."""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING

from slurm_image.domain.architecture import from_machine
from slurm_image.domain.by_name import StablePath
from slurm_image.wire.shapes import stable_path_from

if TYPE_CHECKING:
    from slurm_image.adapters.gateway_client.remote import RemoteLifecycles


def remote_stable_path(lifecycles: RemoteLifecycles, name: str, *, arch: str | None) -> StablePath:
    """The client's side: asked of the gateway for ``arch``, else for this machine's."""
    asked = arch if arch is not None else from_machine(platform.machine())
    params = {"arch": asked} if asked is not None else None
    return lifecycles._ask(stable_path_from, "GET", f"/v1/aliases/{name}/path", params=params)
