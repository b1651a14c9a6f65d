"""Read the site profile: TOML file, ``SLURM_IMAGE_*`` overrides, cluster selection."""

from __future__ import annotations

import hashlib
import os
import socket
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from domain.errors import InvalidProfile
from domain.profile import ProfileSelection, SiteProfile, select_cluster

PROFILE_ENV = "SLURM_IMAGE_PROFILE"
OVERRIDE_PREFIX = "SLURM_IMAGE_"
DEFAULT_PROFILE = "slurm-image.toml"
PROFILE_MAX_BYTES = 1 << 20
TOP_LEVEL_OVERRIDES = frozenset({"WORKSPACE_ROOT"})


def profile_path(explicit: str | None, environ: Mapping[str, str]) -> Path:
    """``--profile`` > ``$SLURM_IMAGE_PROFILE`` > ``./slurm-image.toml``."""
    return Path(explicit or environ.get(PROFILE_ENV) or DEFAULT_PROFILE)


def _literal(text: str) -> Any:
    """An override value: a TOML literal when it reads as one, else the string itself."""
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text


def apply_overrides(document: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Apply ``SLURM_IMAGE_<SECTION>__<KEY>`` (and ``SLURM_IMAGE_WORKSPACE_ROOT``) values.

    In a catalog the overrides apply to every cluster's table. Other ``SLURM_IMAGE_*`` names
    (such as ``SLURM_IMAGE_PROFILE``) are not profile keys and are left alone.
    """
    overrides: list[tuple[list[str], Any]] = []
    for name in sorted(environ):
        if not name.startswith(OVERRIDE_PREFIX):
            continue
        rest = name[len(OVERRIDE_PREFIX) :]
        if "__" not in rest and rest not in TOP_LEVEL_OVERRIDES:
            continue
        keys = [part.lower() for part in rest.split("__")]
        if any(not key for key in keys):
            raise InvalidProfile(name, "must be SLURM_IMAGE_<SECTION>__<KEY>")
        overrides.append((keys, _literal(environ[name])))
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
                    raise InvalidProfile(".".join(keys), "overrides a value that is not a table")
                table = child
            table[keys[-1]] = value
    return document


def host_names() -> list[str]:
    """This host's fully qualified and short names."""
    names = [socket.getfqdn(), socket.gethostname()]
    names += [name.split(".", 1)[0] for name in names]
    return list(dict.fromkeys(name for name in names if name))


def load_profile(
    path: Path,
    *,
    cluster: str | None,
    environ: Mapping[str, str] | None = None,
    hostnames: list[str] | None = None,
) -> tuple[SiteProfile, ProfileSelection]:
    """Load and validate the profile at ``path``. Raises ``InvalidProfile``; writes nothing."""
    environ = os.environ if environ is None else environ
    try:
        with path.open("rb") as handle:
            data = handle.read(PROFILE_MAX_BYTES + 1)
    except FileNotFoundError:
        raise InvalidProfile("profile", f"no profile file at {path}") from None
    except OSError as error:
        raise InvalidProfile("profile", f"cannot read {path}: {error.strerror}") from None
    if len(data) > PROFILE_MAX_BYTES:
        raise InvalidProfile("profile", f"must be at most {PROFILE_MAX_BYTES} bytes")
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise InvalidProfile("profile", f"is not valid TOML: {error}") from None
    document = apply_overrides(document, environ)
    return select_cluster(
        document,
        explicit=cluster,
        hostnames=host_names() if hostnames is None else hostnames,
        catalog_sha256=hashlib.sha256(data).hexdigest(),
    )
