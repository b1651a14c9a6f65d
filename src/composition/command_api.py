"""What a command calls, built from the global options: the Python API (``Lifecycles``) or, for
``show``, ``path`` and ``list``, the catalog reader alone, for ``history`` the history's reader
alone (``composition.lookup``); or, with a gateway (``--gateway``, ``$SLURM_IMAGE_GATEWAY``,
the profile's ``[gateway] url``), the same verbs asked of it (``adapters.gateway_client``). Each
is imported when first asked for, so that a command loads only its own side."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slurm_image.adapters.gateway_client.remote import RemoteLifecycles
    from slurm_image.application.catalog_reader import CatalogReader
    from slurm_image.application.doctor import DoctorReport
    from slurm_image.application.lifecycles_port import LifecyclesPort
    from slurm_image.application.metrics import StoreMetrics
    from slurm_image.application.read_history import FollowHistory, ReadHistory
    from slurm_image.cli.arguments import Options
    from slurm_image.cli.services import Catalog, Exported, History, Serving
    from slurm_image.domain.by_name import StablePath
    from slurm_image.domain.credentials import RegistryCredentials
    from slurm_image.domain.listing import ListQuery, SummaryPage
    from slurm_image.domain.published import PublishedAlias

GATEWAY_ENV = "SLURM_IMAGE_GATEWAY"
MUNGE_SOCKET_ENV = "SLURM_IMAGE_MUNGE_SOCKET"
"""munged's socket the client makes its credentials with over TCP (default munge's own)."""
LOCAL = "local"


def gateway_url(options: Options) -> str | None:
    """The gateway the command asks, or None for this machine's store."""
    url = options.gateway or os.environ.get(GATEWAY_ENV)
    if url is None:
        from slurm_image.composition.profile_loader import gateway_url as from_profile
        from slurm_image.composition.profile_loader import profile_path

        url = from_profile(profile_path(options.profile, os.environ), cluster=options.cluster)
    return None if url in (None, "", LOCAL) else url


def remote(url: str) -> RemoteLifecycles:
    from slurm_image.adapters.gateway_client.exchange import Gateway
    from slurm_image.adapters.gateway_client.remote import RemoteLifecycles

    gateway = Gateway(url)
    source = None
    if gateway.tcp:
        from slurm_image.adapters.munge import DEFAULT_SOCKET, MungeCredentialSource

        source = MungeCredentialSource(socket=os.environ.get(MUNGE_SOCKET_ENV) or DEFAULT_SOCKET)
    return RemoteLifecycles(gateway, credential_source=source)


class _RemoteCatalog:
    def __init__(self, lifecycles: RemoteLifecycles) -> None:
        self._lifecycles = lifecycles

    def show(self, name: str, *, arch: str | None = None) -> PublishedAlias:
        return self._lifecycles.catalog_show(name, arch=arch)

    def stable_path(self, name: str, *, arch: str | None = None) -> StablePath:
        return self._lifecycles.stable_path(name, arch=arch)

    def page(self, query: ListQuery) -> SummaryPage:
        return self._lifecycles.catalog_page(query)


def catalog_reader(options: Options) -> Catalog | CatalogReader:
    url = gateway_url(options)
    if url is not None:
        return _RemoteCatalog(remote(url))
    from slurm_image.composition.lookup import catalog_reader

    return catalog_reader(options.profile, cluster=options.cluster)


def history_reader(options: Options) -> History | ReadHistory:
    url = gateway_url(options)
    if url is not None:
        return remote(url).history
    from slurm_image.composition.lookup import history_reader

    return history_reader(options.profile, cluster=options.cluster)


def history_follower(options: Options) -> FollowHistory:
    """The store's history as it grows, read from this machine's store: a gateway serves no
    such stream, so ``--follow`` with one is refused (exit 2) rather than asked of it."""
    if gateway_url(options) is not None:
        from slurm_image.domain.errors import InvalidRequest

        raise InvalidRequest(
            field="--follow",
            rule="follows the store where it is mounted, not through a gateway (use"
            " --gateway local on a host that mounts the store)",
        )
    from slurm_image.composition.lookup import history_follower

    return history_follower(options.profile, cluster=options.cluster)


def lifecycles(options: Options) -> LifecyclesPort:
    url = gateway_url(options)
    if url is not None:
        return remote(url)
    from slurm_image.composition.api import Lifecycles

    return Lifecycles.from_profile(options.profile, cluster=options.cluster)


def own_credentials(options: Options, registry: str) -> RegistryCredentials | None:
    """Through a gateway, the requester's own netrc entry for ``registry``, sent with an import
    that names a group (docs/gateway.md, "Private images"): Enroot's credentials file of this
    user (``$ENROOT_CONFIG_PATH/.credentials``, else ``~/.config/enroot/.credentials``), held
    to the same rules as the profile's; None without one, or without an entry."""
    from pathlib import Path

    from slurm_image.adapters.credentials_file import LocalCredentialsFile
    from slurm_image.domain.credentials import CREDENTIALS_MAX_BYTES, select_credentials

    config = os.environ.get("ENROOT_CONFIG_PATH") or str(Path("~/.config/enroot").expanduser())
    path = f"{config}/.credentials"
    if not Path(path).exists():
        return None
    data = LocalCredentialsFile().read_credentials_file(path, max_bytes=CREDENTIALS_MAX_BYTES)
    return select_credentials(data, registry)


def export_catalog(options: Options, directory: str) -> Exported:
    """``catalog --html DIR``: what anyone may see of this machine's store, as web pages."""
    from slurm_image.composition.api import Lifecycles
    from slurm_image.gateway.pages.export import export
    from slurm_image.gateway.pages.views import this_machine

    reading = Lifecycles.from_profile(options.profile, cluster=options.cluster).for_anyone()
    return export(reading, directory, this_machine())


def store_metrics(options: Options) -> StoreMetrics:
    """The snapshot of the selected profile's store (``metrics``), built as ``lookup`` builds
    its readers: the validated profile (for the layer cache's settings), the store's read-only
    adapter and its history, ``CollectMetrics``; no container, nothing of the scheduler."""
    from slurm_image.composition import factories
    from slurm_image.composition.profile_loader import (
        layer_cache_bound,
        load_profile,
        profile_path,
    )

    profile, _ = load_profile(profile_path(options.profile, os.environ), cluster=options.cluster)
    store = factories.store_reader(profile.workspace_root)
    metrics = factories.metrics(
        store=store, history=factories.history(store), clock=factories.clock()
    )
    return metrics(layer_cache=layer_cache_bound(profile), store_name=profile.store_name)


class CommandApi:
    """What the command line's commands call (``cli.services.Services``), each part built when
    a command first asks for it."""

    def gateway_url(self, options: Options) -> str | None:
        return gateway_url(options)

    def lifecycles(self, options: Options) -> LifecyclesPort:
        return lifecycles(options)

    def catalog_reader(self, options: Options) -> Catalog:
        return catalog_reader(options)

    def history_reader(self, options: Options) -> History:
        return history_reader(options)

    def history_follower(self, options: Options) -> FollowHistory:
        return history_follower(options)

    def own_credentials(self, options: Options, registry: str) -> RegistryCredentials | None:
        return own_credentials(options, registry)

    def export_catalog(self, options: Options, directory: str) -> Exported:
        return export_catalog(options, directory)

    def store_metrics(self, options: Options) -> StoreMetrics:
        return store_metrics(options)

    def diagnose(self, options: Options, timeout_s: float) -> DoctorReport:
        from slurm_image.composition.doctor import diagnose

        return diagnose(options, timeout_s)

    def serve(self, options: Options, serving: Serving) -> None:
        from slurm_image.composition.serve import run

        run(options, serving)
