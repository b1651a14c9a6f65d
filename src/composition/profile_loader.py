"""Read the site profile: TOML file, ``SLURM_IMAGE_*`` overrides, cluster selection, and the
site policy file over its ``[policy]`` (``composition.site_policy``).

``load_profile`` validates the whole selected profile (the domain's models); ``store_root``
reads only its ``workspace_root``, by the same rule, for the catalog reads (``show``,
``list``) that need nothing else and load no model library."""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import sys
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slurm_image.domain import paths
from slurm_image.domain.errors import DomainError, InvalidProfile
from slurm_image.domain.profile_catalog import choose_profile, is_catalog

if TYPE_CHECKING:
    from slurm_image.domain.layer_cache import CacheBound
    from slurm_image.domain.profile import ProfileSelection, SiteProfile

PROFILE_ENV = "SLURM_IMAGE_PROFILE"
OVERRIDE_PREFIX = "SLURM_IMAGE_"
DEFAULT_PROFILE = "slurm-image.toml"
PROFILE_MAX_BYTES = 1 << 20
TOP_LEVEL_OVERRIDES = frozenset({"WORKSPACE_ROOT"})


def profile_path(explicit: str | None, environ: Mapping[str, str]) -> Path:
    """``--profile`` > ``$SLURM_IMAGE_PROFILE`` > ``./slurm-image.toml``."""
    return Path(explicit or environ.get(PROFILE_ENV) or DEFAULT_PROFILE)


def _unwrap(annotation: Any) -> Any:
    """Strip ``Annotated[...]`` and ``X | None`` down to ``X`` (None for a real union)."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            options = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
            if len(options) != 1:
                return None
            annotation = options[0]
        else:
            return annotation


def _is_text_setting(keys: list[str]) -> bool:
    """Whether the profile key at ``keys`` holds a string, so ``10:00:00`` stays text."""
    from pydantic import BaseModel

    from slurm_image.domain.profile import SiteProfile

    annotation: Any = SiteProfile
    for key in keys:
        annotation = _unwrap(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(key)
            if field is None:
                return False
            annotation = field.annotation
        elif typing.get_origin(annotation) is dict:
            annotation = typing.get_args(annotation)[1]
        else:
            return False
    return _unwrap(annotation) is str


def _literal(name: str, text: str, *, text_setting: bool = False) -> Any:
    """An override value: a TOML literal when it reads as one, else the string itself.

    A key that holds a string keeps the text unless it is a quoted TOML string: TOML would
    otherwise read ``10:00:00`` as a time and an account ``12345`` as an integer.
    """
    try:
        value = tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text
    except (RecursionError, ValueError) as error:
        if text_setting:
            return text
        raise InvalidProfile(field=name, rule=_unreadable(error)) from None
    if text_setting and not isinstance(value, str):
        return text
    return value


def _unreadable(error: RecursionError | ValueError) -> str:
    """The rule a TOML value broke that TOML allows and Python's reader does not."""
    if isinstance(error, RecursionError):
        return "is nested too deeply (arrays or inline tables) to be read"
    if "integer string conversion" in str(error):
        return f"holds an integer of more than {sys.get_int_max_str_digits()} digits"
    return f"cannot be read: {error}"


def apply_overrides(document: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Apply ``SLURM_IMAGE_<SECTION>__<KEY>`` (and ``SLURM_IMAGE_WORKSPACE_ROOT``) values.

    Section and key names are lower-cased, except the variable name in
    ``SLURM_IMAGE_ENROOT__ENVIRONMENT__ENROOT_<NAME>``. In a catalog the overrides apply to every
    cluster's table. Other ``SLURM_IMAGE_*`` names
    (such as ``SLURM_IMAGE_PROFILE``) are not profile keys and are left alone.
    """
    overrides: list[tuple[list[str], Any]] = []
    for name in sorted(environ):
        if not name.startswith(OVERRIDE_PREFIX):
            continue
        rest = name[len(OVERRIDE_PREFIX) :]
        if "__" not in rest and rest not in TOP_LEVEL_OVERRIDES:
            continue
        parts = rest.split("__")
        keys = [part.lower() for part in parts]
        if keys[:2] == ["enroot", "environment"] and len(keys) == 3:
            keys[2] = parts[2]  # an ENROOT_* variable keeps its own name
        if any(not key for key in keys):
            raise InvalidProfile(field=name, rule="must be SLURM_IMAGE_<SECTION>__<KEY>")
        value = _literal(name, environ[name], text_setting=_is_text_setting(keys))
        overrides.append((keys, value))
    targets: list[dict[str, Any]]
    if isinstance(document.get("clusters"), dict):
        targets = [table for table in document["clusters"].values() if isinstance(table, dict)]
    else:
        targets = [document]
    for target in targets:
        for keys, value in overrides:
            table = target
            for key in keys[:-1]:
                child = table.setdefault(key, {})
                if not isinstance(child, dict):
                    raise InvalidProfile(
                        field=".".join(keys), rule="overrides a value that is not a table"
                    )
                table = child
            table[keys[-1]] = value
    return document


def host_names() -> list[str]:
    """This host's fully qualified and short names."""
    names = [socket.getfqdn(), socket.gethostname()]
    names += [name.split(".", 1)[0] for name in names]
    return list(dict.fromkeys(name for name in names if name))


def _read_profile(path: Path) -> bytes:
    """The profile's bytes, through one descriptor that never blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InvalidProfile(field="profile", rule=f"no profile file at {path}") from None
    except OSError as error:
        raise InvalidProfile(
            field="profile", rule=f"cannot read {path}: {error.strerror}"
        ) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InvalidProfile(field="profile", rule=f"{path} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(PROFILE_MAX_BYTES + 1)
    except OSError as error:
        raise InvalidProfile(
            field="profile", rule=f"cannot read {path}: {error.strerror}"
        ) from None
    finally:
        os.close(fd)


def _document(path: Path, environ: Mapping[str, str]) -> tuple[dict[str, Any], str]:
    """The profile file's document with the overrides applied, and the file's SHA-256."""
    data = _read_profile(path)
    if len(data) > PROFILE_MAX_BYTES:
        raise InvalidProfile(field="profile", rule=f"must be at most {PROFILE_MAX_BYTES} bytes")
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise InvalidProfile(field="profile", rule=f"is not valid TOML: {error}") from None
    except (RecursionError, ValueError) as error:  # valid TOML that Python cannot hold
        raise InvalidProfile(field="profile", rule=f"{path} {_unreadable(error)}") from None
    return apply_overrides(document, environ), hashlib.sha256(data).hexdigest()


def _host_names_for(
    document: Mapping[str, Any], cluster: str | None, hostnames: list[str] | None
) -> list[str]:
    if hostnames is not None:
        return hostnames
    # Only a catalog without --cluster is chosen by host name: a single profile never asks the
    # resolver for this host's fully qualified name.
    return host_names() if is_catalog(document) and cluster is None else []


def load_profile(
    path: Path,
    *,
    cluster: str | None,
    environ: Mapping[str, str] | None = None,
    hostnames: list[str] | None = None,
    site_policy: str | None = None,
) -> tuple[SiteProfile, ProfileSelection]:
    """Load and validate the profile at ``path``, under the site policy when its file exists
    (``site_policy``: that file, for tests; else ``site_policy.SITE_POLICY_PATH``: no
    variable or option names another). Raises ``InvalidProfile``; writes nothing."""
    from slurm_image.composition.site_policy import read_site_policy
    from slurm_image.domain.profile import select_cluster

    document, catalog_sha256 = _document(path, os.environ if environ is None else environ)
    return select_cluster(
        document,
        explicit=cluster,
        hostnames=_host_names_for(document, cluster, hostnames),
        catalog_sha256=catalog_sha256,
        site_policy=read_site_policy(site_policy),
    )


def store_root(
    path: Path,
    *,
    cluster: str | None,
    environ: Mapping[str, str] | None = None,
    hostnames: list[str] | None = None,
) -> str:
    """The selected profile's ``workspace_root``, checked by its rule, and nothing else of the
    profile (the catalog reads). Raises ``InvalidProfile``; writes nothing."""
    document, _ = _document(path, os.environ if environ is None else environ)
    choice = choose_profile(
        document, explicit=cluster, hostnames=_host_names_for(document, cluster, hostnames)
    )
    field = f"{choice.prefix}workspace_root"
    value = choice.table.get("workspace_root")
    if value is None:
        raise InvalidProfile(field=field, rule="is required")
    if not isinstance(value, str):
        raise InvalidProfile(field=field, rule="must be a string")
    try:
        return paths.workspace_root(value, "workspace_root")
    except DomainError as error:
        raise InvalidProfile(field=field, rule=error.rule) from None


def layer_cache_bound(profile: SiteProfile) -> CacheBound | None:
    """The profile's layer cache as this machine reaches it (README, "The layer cache": ``~``
    is the home of the user running the command) and the bytes ``gc`` keeps it to; None when
    the profile turns it off."""
    from slurm_image.domain.layer_cache import cache_bound

    enroot = profile.enroot
    home = str(Path("~").expanduser())
    return cache_bound(enroot.layer_cache, enroot.cache_max_bytes, profile.workspace_root, home)


def gateway_url(
    path: Path,
    *,
    cluster: str | None,
    environ: Mapping[str, str] | None = None,
    hostnames: list[str] | None = None,
) -> str | None:
    """The selected profile's ``[gateway] url`` (where a client asks the site's gateway), or
    None when the file or the setting is absent; nothing else of the profile is read or
    required (a client's profile may hold that setting alone)."""
    if not path.exists():
        return None
    document, _ = _document(path, os.environ if environ is None else environ)
    choice = choose_profile(
        document, explicit=cluster, hostnames=_host_names_for(document, cluster, hostnames)
    )
    section = choice.table.get("gateway")
    value = section.get("url") if isinstance(section, dict) else None
    if value is not None and not isinstance(value, str):
        raise InvalidProfile(field=f"{choice.prefix}gateway.url", rule="must be a string")
    return value
