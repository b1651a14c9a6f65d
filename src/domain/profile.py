"""The site profile (docs/cli.md, "The profile"): its model, its rules, and how a cluster is picked
from a catalog."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from slurm_image.domain import layer_cache, paths, sizes
from slurm_image.domain.architecture import check_architecture
from slurm_image.domain.by_name import DEFAULT_RELEASE_GRACE
from slurm_image.domain.canonical import canonical_json, sha256_hex
from slurm_image.domain.errors import DomainError, InvalidProfile
from slurm_image.domain.gateway_settings import GatewaySettings
from slurm_image.domain.model_config import FROZEN, FROZEN_OPEN, absent_when_none
from slurm_image.domain.policy import Policy, strictest
from slurm_image.domain.profile_catalog import How, choose_profile
from slurm_image.domain.publication import parse_age
from slurm_image.domain.rest_api import AUTO, REST_API_VERSIONS

TIME_PATTERN = re.compile(r"([0-9]+):([0-5][0-9]):([0-5][0-9])")
ENROOT_ENVIRONMENT_ALLOWED = frozenset(
    {
        "ENROOT_SQUASH_OPTIONS",
        "ENROOT_ZSTD_OPTIONS",
        "ENROOT_GZIP_PROGRAM",
        "ENROOT_TRANSFER_RETRIES",
        "ENROOT_TRANSFER_TIMEOUT",
        "ENROOT_CONNECT_TIMEOUT",
        "ENROOT_MAX_CONNECTIONS",
        "ENROOT_ALLOW_HTTP",
    }
)
ENROOT_ENVIRONMENT_RESERVED = frozenset(
    {
        "ENROOT_CONFIG_PATH",
        "ENROOT_CACHE_PATH",
        "ENROOT_DATA_PATH",
        "ENROOT_TEMP_PATH",
        "ENROOT_RUNTIME_PATH",
        "ENROOT_MAX_PROCESSORS",
        "ENROOT_LOGIN_SHELL",
        "ENROOT_MOUNT_HOME",
    }
)
ENROOT_YES = frozenset({"y", "yes", "true", "1", "on"})
"""The values Enroot reads as yes in a boolean setting (the others are no)."""
SUBMITTER_KIND = re.compile(r"[a-z][a-z0-9_-]{0,63}")
IMPORTERS = ("enroot", "stream")
"""What turns an image's layers into its squashfs: Enroot's own import (the default), or the
stream importer (merge_layers.py into tar2sqfs, docs/enroot.md section 16)."""
DEFAULT_IMPORTER = "enroot"
STREAM_TOOLS = ("python3", "tar2sqfs")
"""What the stream importer runs on the node (the job exits 85 without either)."""


# One year: a job limit beyond it is a typo, and Slurm keeps limits in 32-bit minutes.
MAX_TIME_LIMIT_HOURS = 8760


def _memory(value: str) -> str:
    if not sizes.SIZE_PATTERN.fullmatch(value):
        raise ValueError("must match ^[1-9][0-9]*[KMGT]$ (e.g. 16G)")
    # sbatch rounds --mem up to whole MiB and slurmrestd takes whole MiB: only a value both
    # read alike is accepted (1500K would be 2M through one and 1M through the other).
    if value.endswith("K") and int(value[:-1]) % 1024:
        raise ValueError("must be a whole number of MiB: K values must be multiples of 1024")
    return value


def _time_limit(value: str) -> str:
    match = TIME_PATTERN.fullmatch(value)
    if not match:
        raise ValueError("must be H:MM:SS (e.g. 1:00:00)")
    if not any(int(part) for part in match.groups()):
        raise ValueError("must not be zero")
    if len(match.group(1)) > 1 and match.group(1).startswith("0"):
        raise ValueError("hours must not have a leading zero")
    hours, minutes, seconds = (int(part) for part in match.groups())
    if hours * 3600 + minutes * 60 + seconds > MAX_TIME_LIMIT_HOURS * 3600:
        raise ValueError(f"must be at most {MAX_TIME_LIMIT_HOURS}:00:00 (one year)")
    return value


def _importer(value: str) -> str:
    if value not in IMPORTERS:
        raise ValueError(f"must be one of {', '.join(repr(name) for name in IMPORTERS)}")
    return value


def _slurm_name(field: str) -> AfterValidator:
    def check(value: str) -> str:
        try:
            return paths.slurm_name(value, field)
        except DomainError as error:
            raise ValueError(error.rule) from None

    return AfterValidator(check)


def _path_rule(rule: Any, field: str) -> AfterValidator:
    def check(value: str) -> str:
        try:
            return str(rule(value, field))
        except DomainError as error:
            raise ValueError(error.rule) from None

    return AfterValidator(check)


class ImageBuild(BaseModel):
    model_config = FROZEN

    partition: Annotated[str, _slurm_name("image_build.partition")]
    account: Annotated[str, _slurm_name("image_build.account")] | None = None
    qos: Annotated[str, _slurm_name("image_build.qos")] | None = None
    cpus_per_task: Annotated[int, Field(ge=1, le=99999)]
    memory: Annotated[str, AfterValidator(_memory)]
    time_limit: Annotated[str, AfterValidator(_time_limit)]
    local_scratch: Annotated[str, _path_rule(paths.local_scratch, "local_scratch")] | None = None
    job_path: Annotated[str, _path_rule(paths.job_path, "job_path")] = paths.DEFAULT_JOB_PATH
    arch: Annotated[str, _path_rule(check_architecture, "arch")] | None = absent_when_none()
    """The architecture this profile builds for; None: the build node's."""
    importer: Annotated[str, AfterValidator(_importer)] | None = absent_when_none()
    """``IMPORTERS``' name of what imports; None: ``DEFAULT_IMPORTER``."""

    @property
    def importer_name(self) -> str:
        return self.importer or DEFAULT_IMPORTER


class Inspection(BaseModel):
    model_config = FROZEN

    client_distributions: tuple[str, ...] = ("pip",)

    @field_validator("client_distributions", mode="before")
    @classmethod
    def _listify(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("client_distributions")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,126}[A-Za-z0-9])?", item):
                raise ValueError(f"{item!r} is not a distribution name (PEP 508)")
        if len(set(value)) != len(value):
            raise ValueError("must not repeat a name")
        return value


def _cache_size(value: str) -> str:
    layer_cache.size_bytes(value)
    return value


def _credentials_file(value: str) -> str:
    """The user's netrc: absolute, or below the home directory as ``~/...`` (expanded when read)."""
    if not (value.startswith("/") or value.startswith("~/")):
        raise ValueError("must be an absolute path or start with ~/")
    if len(value) > 4096 or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise ValueError("must be at most 4096 characters without control characters")
    return value


class Enroot(BaseModel):
    model_config = FROZEN

    environment: dict[str, str] = Field(default_factory=dict)
    credentials_file: Annotated[str, AfterValidator(_credentials_file)] | None = None
    layer_cache: str | bool | None = absent_when_none()
    """Enroot's layer cache kept between jobs: a path (``~/`` expanded), ``False`` (off), or
    None: ``<workspace_root>/images/layer-cache``."""
    layer_cache_max: Annotated[str, AfterValidator(_cache_size)] | None = absent_when_none()
    """The size ``gc`` bounds the cache to; None: ``layer_cache.DEFAULT_MAX``."""

    @field_validator("layer_cache", mode="before")
    @classmethod
    def _cache(cls, value: object) -> object:
        if value is True or not isinstance(value, str | bool):
            raise ValueError("must be a path or false (the default needs no value)")
        if isinstance(value, str):
            try:
                paths.layer_cache(value, layer_cache.FIELD)
            except DomainError as error:
                raise ValueError(error.rule) from None
        return value

    @property
    def cache_max_bytes(self) -> int:
        return layer_cache.size_bytes(self.layer_cache_max or layer_cache.DEFAULT_MAX)

    @property
    def allows_http(self) -> bool:
        """Whether ``ENROOT_ALLOW_HTTP`` holds one of the values Enroot reads as yes: the job's
        Enroot then asks registries over plain HTTP, and ``resolve`` may ask one that does not
        speak TLS (anonymously; docs/design.md, "Registry authentication")."""
        value = self.environment.get("ENROOT_ALLOW_HTTP", "")
        return value.strip().lower() in ENROOT_YES

    @field_validator("environment", mode="before")
    @classmethod
    def _numbers_as_text(cls, value: object) -> object:
        """``ENROOT_TRANSFER_RETRIES = 3`` is natural TOML; Enroot reads every value as text."""
        if not isinstance(value, dict):
            return value
        return {
            key: str(item) if isinstance(item, int) and not isinstance(item, bool) else item
            for key, item in value.items()
        }

    @field_validator("environment")
    @classmethod
    def _allowlisted(cls, value: dict[str, str]) -> dict[str, str]:
        for key, item in value.items():
            if key in ENROOT_ENVIRONMENT_RESERVED:
                raise ValueError(f"{key} is set by the job itself and cannot be overridden")
            if key not in ENROOT_ENVIRONMENT_ALLOWED:
                allowed = ", ".join(sorted(ENROOT_ENVIRONMENT_ALLOWED))
                raise ValueError(f"{key} is not one of the allowed settings ({allowed})")
            if len(item) > 1024 or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in item):
                raise ValueError(
                    f"{key} must be at most 1024 characters without control characters"
                )
        return value


def _store_name(value: str) -> str:
    if not 1 <= len(value) <= 255 or any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in value):
        raise ValueError("must be 1 to 255 characters without control characters")
    return value


def _age(value: str) -> str:
    try:
        parse_age(value, "store.release_grace")
    except DomainError as error:
        raise ValueError(error.rule) from None
    return value


class StoreSettings(BaseModel):
    """``[store]`` (docs/operations.md, "Run by name"): how the store keeps what it replaced."""

    model_config = FROZEN

    release_grace: Annotated[str, AfterValidator(_age)] | None = None
    """How long ``gc`` keeps an artifact after its last alias let go of it (``30m``, ``12h``,
    ``2d``); None: ``domain.by_name.DEFAULT_RELEASE_GRACE``."""

    @property
    def grace(self) -> timedelta:
        if self.release_grace is None:
            return DEFAULT_RELEASE_GRACE
        return parse_age(self.release_grace, "store.release_grace")


class MetricsSettings(BaseModel):
    """``[metrics]`` (docs/operations.md, "Metrics"): what ``metrics`` calls the store."""

    model_config = FROZEN

    store_name: Annotated[str, AfterValidator(_store_name)] | None = None
    """The ``store`` label of every series; None: the workspace root."""


def _seconds(value: object) -> object:
    """An integer number of seconds as the float the field holds; one too large for a float is
    infinite, and so refused by the field's bound like any other value above it."""
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            return float("inf")
    return value


class SbatchSettings(BaseModel):
    model_config = FROZEN

    sbatch: str = "sbatch"
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0

    @field_validator("timeout_s", mode="before")
    @classmethod
    def _int_ok(cls, value: object) -> object:
        return _seconds(value)

    @field_validator("sbatch")
    @classmethod
    def _program(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_./+-]{1,1024}", value) or ".." in value.split("/"):
            raise ValueError("must be a program name or an absolute path without '..'")
        if "/" in value and not value.startswith("/"):
            raise ValueError("a path must be absolute")
        return value


class RestSettings(BaseModel):
    model_config = FROZEN

    url: str = "http://127.0.0.1:6820"
    user: str | None = None
    token_file: str | None = None
    token_env: str | None = None
    api_version: str = "auto"
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0

    @field_validator("timeout_s", mode="before")
    @classmethod
    def _int_ok(cls, value: object) -> object:
        return _seconds(value)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.fullmatch(
            r"(https?://[A-Za-z0-9.\-\[\]:]+(/[A-Za-z0-9._~/-]*)?|unix:///[^\s]+)", value
        ):
            raise ValueError("must be http(s)://host[:port] or unix:///absolute/socket/path")
        return value

    @field_validator("api_version")
    @classmethod
    def _version(cls, value: str) -> str:
        if value != AUTO and value not in REST_API_VERSIONS:
            raise ValueError(f'must be "{AUTO}" or one of {", ".join(REST_API_VERSIONS)}')
        return value

    @field_validator("user")
    @classmethod
    def _user(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[a-z_][a-z0-9_.-]{0,31}\$?", value):
            raise ValueError("must be a POSIX user name")
        return value

    @field_validator("token_env")
    @classmethod
    def _env(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", value):
            raise ValueError("must be an environment variable name")
        return value


SITE_SETTINGS_MAX_DEPTH = 32
_INT64 = range(-(2**63), 2**63)


def _plain_settings(value: object, where: str, depth: int = 0) -> None:
    """A site submitter's table holds what the plan can record: tables and arrays nested at
    most ``SITE_SETTINGS_MAX_DEPTH`` deep, and integers of 64 bits (as TOML defines them)."""
    if depth > SITE_SETTINGS_MAX_DEPTH:
        raise ValueError(f"{where} is nested deeper than {SITE_SETTINGS_MAX_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            _plain_settings(item, f"{where}.{key}", depth + 1)
    elif isinstance(value, list):
        for item in value:
            _plain_settings(item, where, depth + 1)
    elif isinstance(value, int) and not isinstance(value, bool) and value not in _INT64:
        raise ValueError(f"{where} must be an integer of 64 bits")


class Submitter(BaseModel):
    """Which submitter to use, and its settings.

    A site submitter (entry-point group ``slurm_image.submitters``) reads its settings from the
    table ``[submitter.<kind>]``; no other extra table is accepted.
    """

    model_config = FROZEN_OPEN

    kind: str = "sbatch"
    sbatch: SbatchSettings = Field(default_factory=SbatchSettings)
    rest: RestSettings = Field(default_factory=RestSettings)

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        if not SUBMITTER_KIND.fullmatch(value):
            raise ValueError("must be sbatch, rest, fake or a registered submitter name")
        return value

    @model_validator(mode="after")
    def _settings(self) -> Submitter:
        for key, value in (self.model_extra or {}).items():
            if key != self.kind:
                raise ValueError(
                    f"[submitter.{key}] is not a known table (only [submitter.{self.kind}]"
                    " may hold a site submitter's settings)"
                )
            if not isinstance(value, dict):
                raise ValueError(f"submitter.{key} must be a table")
            _plain_settings(value, f"submitter.{key}")
        if self.kind == "rest" and self.rest.url.startswith(("http://", "https://")):
            if self.rest.user is None:
                raise ValueError("submitter.rest.user is required for slurmrestd over TCP")
            if (self.rest.token_file is None) == (self.rest.token_env is None):
                raise ValueError(
                    "submitter.rest needs exactly one of token_file and token_env over TCP"
                )
        return self

    @property
    def site_settings(self) -> dict[str, Any]:
        """The ``[submitter.<kind>]`` table of a site submitter (empty when there is none)."""
        table = (self.model_extra or {}).get(self.kind, {})
        return dict(table) if isinstance(table, dict) else {}


class SiteProfile(BaseModel):
    """One cluster's site profile."""

    model_config = FROZEN

    workspace_root: Annotated[str, _path_rule(paths.workspace_root, "workspace_root")]
    image_build: ImageBuild
    inspection: Inspection = Field(default_factory=Inspection)
    enroot: Enroot = Field(default_factory=Enroot)
    submitter: Submitter = Field(default_factory=Submitter)
    policy: Policy | None = absent_when_none()
    """``[policy]`` (docs/design.md, "Image policy and signatures"); None: any registry, no
    signature required."""
    gateway: GatewaySettings | None = absent_when_none()
    """``[gateway]`` (docs/gateway.md): who may do what through ``slurm-image serve`` and its
    limits; None: the defaults (every authenticated user imports, the store's owner alone is
    an admin)."""
    metrics: MetricsSettings | None = absent_when_none()
    """``[metrics]`` (docs/operations.md); None: every default."""
    store: StoreSettings | None = absent_when_none()
    """``[store]`` (docs/operations.md, "Run by name"); None: every default."""

    @property
    def release_grace(self) -> timedelta:
        return (self.store or StoreSettings()).grace

    @property
    def gateway_settings(self) -> GatewaySettings:
        """``[gateway]``, else every default."""
        return self.gateway or GatewaySettings()

    @property
    def store_name(self) -> str:
        """The name ``metrics`` gives the store (every series' ``store`` label): ``[metrics]
        store_name``, else the workspace root, which no two stores share."""
        if self.metrics is not None and self.metrics.store_name is not None:
            return self.metrics.store_name
        return self.workspace_root

    def sha256(self) -> str:
        return sha256_hex(canonical_json(self.model_dump(mode="json")))


class ProfileSelection(BaseModel):
    """How the profile was chosen, so a job traces back to its exact configuration."""

    model_config = FROZEN

    how: How
    cluster: str | None = None
    pattern: str | None = None
    catalog_sha256: str | None = None
    profile_sha256: str
    site_policy_sha256: str | None = absent_when_none()
    """The SHA-256 of the site policy file merged into the profile's ``[policy]`` (the
    profile recorded holds the result); None: there was none."""


def _field_of(error: ValidationError) -> tuple[str, str]:
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"]) or "profile"
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "is not a known profile key"
    elif first["type"] == "missing":
        message = "is required"
    message = message.removeprefix("Value error, ")
    return location, message


def parse_profile(data: Mapping[str, Any], prefix: str = "") -> SiteProfile:
    """Validate a profile mapping (from TOML and overrides). Raises ``InvalidProfile``."""
    try:
        return SiteProfile.model_validate(dict(data))
    except ValidationError as error:
        location, message = _field_of(error)
        raise InvalidProfile(field=prefix + location, rule=message) from None


@dataclass(frozen=True)
class SitePolicy:
    """The site policy file (docs/design.md, "The site policy"): where it was read, the SHA-256
    of its bytes, and its ``[policy]`` table."""

    path: str
    sha256: str
    policy: Policy


class _SitePolicyFile(BaseModel):
    """What the site policy file holds: one ``[policy]`` table and nothing else."""

    model_config = FROZEN

    policy: Policy


def parse_site_policy(document: Mapping[str, Any], *, path: str, sha256: str) -> SitePolicy:
    """The site policy of the TOML document of the file at ``path``. Raises
    ``InvalidProfile`` naming the file and the key."""
    try:
        policy = _SitePolicyFile.model_validate(dict(document)).policy
    except ValidationError as error:
        location, message = _field_of(error)
        raise InvalidProfile(field=f"{path}: {location}", rule=message) from None
    return SitePolicy(path=path, sha256=sha256, policy=policy)


def under_site_policy(profile: SiteProfile, site: SitePolicy, prefix: str = "") -> SiteProfile:
    """``profile`` with the policy in force under ``site``: ``policy.strictest`` of the two.
    Raises ``InvalidProfile`` (``prefix``: the cluster's, in a catalog)."""
    try:
        policy = strictest(site.policy, profile.policy)
    except InvalidProfile as error:
        raise InvalidProfile(
            field=prefix + error.field, rule=f"{error.rule} (site policy {site.path})"
        ) from None
    return profile.model_copy(update={"policy": policy})


def select_cluster(
    document: Mapping[str, Any],
    *,
    explicit: str | None,
    hostnames: Sequence[str],
    catalog_sha256: str,
    site_policy: SitePolicy | None = None,
) -> tuple[SiteProfile, ProfileSelection]:
    """Pick (``profile_catalog.choose_profile``) and validate one profile from a file that is a
    catalog or a single profile; under a ``site_policy``, its ``[policy]`` is the strictest of
    the two (``under_site_policy``) and the selection records the site file's SHA-256."""
    choice = choose_profile(document, explicit=explicit, hostnames=hostnames)
    profile = parse_profile(choice.table, prefix=choice.prefix)
    if site_policy is not None:
        profile = under_site_policy(profile, site_policy, choice.prefix)
    selection = ProfileSelection(
        how=choice.how,
        cluster=choice.cluster,
        pattern=choice.pattern,
        catalog_sha256=catalog_sha256,
        profile_sha256=profile.sha256(),
        site_policy_sha256=site_policy.sha256 if site_policy is not None else None,
    )
    return profile, selection
