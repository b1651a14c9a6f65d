"""What a user asks for: an alias, a role, and a source to import or inspect."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ValidationError, model_validator

from slurm_image.domain import paths
from slurm_image.domain.access import Ownership
from slurm_image.domain.architecture import check_architecture
from slurm_image.domain.errors import DomainError, InvalidRequest
from slurm_image.domain.model_config import FROZEN, absent_when_none
from slurm_image.domain.reference import parse_reference
from slurm_image.domain.requester import Requester, account_name
from slurm_image.domain.resolution import ResolvedFrom
from slurm_image.domain.roles import ROLES, Role

Operation = Literal["import_oci", "inspect_sqsh"]


class Request(BaseModel):
    """A validated request: ``source`` is an OCI reference (import) or a ``.sqsh`` path;
    ``architecture`` the one asked for (``--arch``), None to leave it to the profile or the
    node the job runs on; ``resolved_from`` the tag an import's pin was resolved from
    (``import --resolve``), or for an inspection of a stored artifact the tag of the import it
    stands for; None when the source was given pinned. ``unsigned_ok``: an inspection the user
    let through under the policy's ``require_signature`` although a local file carries no
    signature (``inspect --unsigned-ok``; True or absent).

    Through the gateway (docs/gateway.md): ``requester`` the account the request acts for
    (absent: the account that runs the command, which owns the store); ``group`` the group the
    alias is shared with (``--group``); ``private`` (True or absent) when the import uses the
    requester's own registry credentials, so that only ``group`` may see what it publishes."""

    model_config = FROZEN

    operation: Operation
    name: str
    role: Role
    source: str
    architecture: str | None = absent_when_none()
    resolved_from: ResolvedFrom | None = absent_when_none()
    unsigned_ok: Literal[True] | None = absent_when_none()
    requester: Requester | None = absent_when_none()
    group: str | None = absent_when_none()
    private: Literal[True] | None = absent_when_none()

    @model_validator(mode="after")
    def _rules(self) -> Request:
        paths.name(self.name, "name")
        if self.unsigned_ok and self.operation != "inspect_sqsh":
            raise InvalidRequest(
                field="unsigned_ok",
                rule="is for inspecting a local .sqsh: an import's signature is checked",
            )
        if self.operation == "import_oci":
            parse_reference(self.source)
            if self.resolved_from is not None:
                self.resolved_from.check_source(self.source)
        else:
            paths.sqsh_path(self.source, "source")
        if self.architecture is not None:
            check_architecture(self.architecture)
        if self.group is not None:
            account_name(self.group, "group")
        if self.private and self.group is None:
            raise InvalidRequest(
                field="group",
                rule="an import with your own registry credentials must name the group that may"
                " see it (--group)",
            )
        if self.private and self.operation != "import_oci":
            raise InvalidRequest(field="private", rule="only an import uses registry credentials")
        return self

    @property
    def ownership(self) -> Ownership:
        """Who an alias this request first publishes belongs to (``domain.access``)."""
        return Ownership(owner=self.requester, group=self.group, private=bool(self.private))

    @property
    def gateway_fields(self) -> bool:
        """Whether the request carries what only requests through the gateway carry."""
        return self.requester is not None or self.group is not None or bool(self.private)


def make_request(
    operation: Operation,
    *,
    name: str,
    role: str,
    source: str,
    architecture: str | None = None,
    resolved_from: ResolvedFrom | None = None,
    unsigned_ok: bool = False,
    requester: Requester | None = None,
    group: str | None = None,
    private: bool = False,
) -> Request:
    """Build a request, raising one ``DomainError`` that names the first field at fault."""
    if role not in ROLES:
        raise InvalidRequest(field="role", rule="must be 'client' or 'serving'", value=role)
    try:
        return Request(
            operation=operation,
            name=name,
            role=role,
            source=source,
            architecture=architecture,
            resolved_from=resolved_from,
            unsigned_ok=True if unsigned_ok else None,
            requester=requester,
            group=group,
            private=True if private else None,
        )
    except ValidationError as error:
        cause = error.errors()[0].get("ctx", {}).get("error")
        if isinstance(cause, DomainError):
            raise cause from None
        raise InvalidRequest(
            field=str(error.errors()[0]["loc"][0]), rule=error.errors()[0]["msg"]
        ) from None


def check_fields(*, name: str, role: str, architecture: str | None = None) -> None:
    """The rules of a request's name, role and architecture, by themselves: checked before a
    tag is resolved, so that a request that cannot be made asks no registry."""
    if role not in ROLES:
        raise InvalidRequest(field="role", rule="must be 'client' or 'serving'", value=role)
    paths.name(name, "name")
    if architecture is not None:
        check_architecture(architecture)
