"""What requests to the gateway carry (docs/gateway.md, "The API"): typed bodies that refuse
unknown fields, each translated into the same arguments the command line gives ``Lifecycles``.
The gateway reads them; the client writes the same models (``request_json``), unchecked, so that
what is wrong is refused by the gateway, with its error body. Their values are checked by the
domain's rules when the verb runs, exactly as on the command line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, SecretStr

if TYPE_CHECKING:
    from slurm_image.domain.credentials import RegistryCredentials

BODY = ConfigDict(extra="forbid", strict=True, frozen=True)

MAX_TEXT = 4096
MAX_WAIT_S = 25.0
"""The longest one long poll of ``wait`` is held; a client asks again for longer waits."""


class Credentials(BaseModel):
    """The requester's own netrc entry for the source's registry (never kept, never
    printed)."""

    model_config = BODY

    host: str = Field(max_length=MAX_TEXT)
    login: str = Field(max_length=MAX_TEXT)
    password: SecretStr = Field(max_length=MAX_TEXT)


def credentials_body(credentials: RegistryCredentials | None) -> Credentials | None:
    """What a request carries of the requester's ``credentials`` (None: none)."""
    if credentials is None:
        return None
    return Credentials.model_construct(
        host=credentials.host, login=credentials.login, password=SecretStr(credentials.password)
    )


def request_json(body: BaseModel) -> dict[str, Any]:
    """``body`` as the client sends it: every field, a password as its own text."""
    return {key: _plain(value) for key, value in body.model_dump().items()}


def _plain(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def registry_credentials(given: Credentials | None) -> RegistryCredentials | None:
    """The domain's form of credentials sent with a request (None: none sent)."""
    if given is None:
        return None
    from slurm_image.domain.credentials import RegistryCredentials

    return RegistryCredentials(
        host=given.host, login=given.login, password=given.password.get_secret_value()
    )


class Asked(TypedDict):
    """What ``Lifecycles.plan`` and ``Lifecycles.request`` take besides the operation and the
    source."""

    name: str
    role: str
    arch: str | None
    resolve: bool
    unsigned_ok: bool
    group: str | None
    credentials: RegistryCredentials | None


class LifecycleBody(BaseModel):
    """``import``/``inspect`` (and their ``--dry-run``): what the command line's options say."""

    model_config = BODY

    operation: Literal["import_oci", "inspect_sqsh"]
    source: str = Field(max_length=MAX_TEXT)
    name: str = Field(max_length=MAX_TEXT)
    role: str = Field(max_length=64)
    arch: str | None = Field(default=None, max_length=64)
    resolve: bool = False
    unsigned_ok: bool = False
    group: str | None = Field(default=None, max_length=64)
    credentials: Credentials | None = None
    submit: bool = True
    replace: bool = False
    force: bool = False

    def asked(self) -> Asked:
        return Asked(
            name=self.name,
            role=self.role,
            arch=self.arch,
            resolve=self.resolve,
            unsigned_ok=self.unsigned_ok,
            group=self.group,
            credentials=registry_credentials(self.credentials),
        )


class FinishBody(BaseModel):
    """Publish a lifecycle for the request that started or joined it (as its answer gave it)."""

    model_config = BODY

    request: dict[str, Any]
    replace: bool = False


class WaitBody(BaseModel):
    model_config = BODY

    lifecycle_ids: list[str] = Field(min_length=1, max_length=1000)
    timeout_s: float = Field(default=MAX_WAIT_S, ge=0, le=MAX_WAIT_S)


class ResolveBody(BaseModel):
    model_config = BODY

    reference: str = Field(max_length=MAX_TEXT)
    arch: str | None = Field(default=None, max_length=64)
    timeout_s: float = Field(default=60.0, gt=0, le=3600)
    credentials: Credentials | None = None


class PublishBody(BaseModel):
    model_config = BODY

    replace: bool = False


class GcBody(BaseModel):
    model_config = BODY

    older_than: str = Field(default="7d", max_length=64)
    dry_run: bool = False
