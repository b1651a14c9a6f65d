"""What a user asks for: an alias, a role, and a source to import or inspect."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ValidationError, model_validator

from slurm_image.domain import paths
from slurm_image.domain.errors import DomainError, InvalidRequest
from slurm_image.domain.model_config import FROZEN
from slurm_image.domain.reference import parse_reference
from slurm_image.domain.roles import ROLES, Role

Operation = Literal["import_oci", "inspect_sqsh"]


class Request(BaseModel):
    """A validated request: ``source`` is an OCI reference (import) or a ``.sqsh`` path."""

    model_config = FROZEN

    operation: Operation
    name: str
    role: Role
    source: str

    @model_validator(mode="after")
    def _rules(self) -> Request:
        paths.name(self.name, "name")
        if self.operation == "import_oci":
            parse_reference(self.source)
        else:
            paths.sqsh_path(self.source, "source")
        return self


def make_request(operation: Operation, *, name: str, role: str, source: str) -> Request:
    """Build a request, raising one ``DomainError`` that names the first field at fault."""
    if role not in ROLES:
        raise InvalidRequest(field="role", rule="must be 'client' or 'serving'", value=role)
    try:
        return Request(operation=operation, name=name, role=role, source=source)
    except ValidationError as error:
        cause = error.errors()[0].get("ctx", {}).get("error")
        if isinstance(cause, DomainError):
            raise cause from None
        raise InvalidRequest(
            field=str(error.errors()[0]["loc"][0]), rule=error.errors()[0]["msg"]
        ) from None
