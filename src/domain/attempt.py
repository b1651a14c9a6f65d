"""The records an attempt keeps about itself: what was staged, and what was submitted.

Both are canonical JSON (``domain.canonical``) so that their bytes have one digest; both refuse
anything but their own exact shape when loaded back.
"""

from __future__ import annotations

from typing import Literal, TypeVar

from pydantic import BaseModel, ValidationError, model_validator

from slurm_image.domain import paths
from slurm_image.domain.canonical import SHA256_HEX, canonical_json
from slurm_image.domain.errors import DomainError, InvalidRecord
from slurm_image.domain.identity import FileIdentity
from slurm_image.domain.job import is_marker_of
from slurm_image.domain.model_config import FROZEN

RECORD_MAX_BYTES = 64 * 1024
ATTEMPT_RECORD_MODE = 0o600
"""``staged.json`` and ``submission.json``: private to the workspace owner."""
Record = TypeVar("Record", bound=BaseModel)


def _check_hex(record: BaseModel, fields: tuple[str, ...]) -> None:
    for field in fields:
        if not SHA256_HEX.fullmatch(getattr(record, field)):
            raise InvalidRecord(field=field, rule="must be 64 lowercase hex")


class StagedRecord(BaseModel):
    """Written at prepare, last: the digest of every staged file and the attempt's identity.

    ``submit`` in a fresh process compares the files against this record *and* against the
    script re-rendered from the plan, so rebinding a digest here does not make an edit pass.
    """

    model_config = FROZEN

    schema_version: Literal[1] = 1
    lifecycle_id: str
    job_dir: FileIdentity
    plan_sha256: str
    script_sha256: str
    inspector_sha256: str
    rc_sha256: str
    credentials_sha256: str | None = None
    """The staged registry credentials' digest (the file itself is never recorded)."""

    @model_validator(mode="after")
    def _rules(self) -> StagedRecord:
        paths.name(self.lifecycle_id, "lifecycle_id")
        _check_hex(self, ("plan_sha256", "script_sha256", "inspector_sha256", "rc_sha256"))
        if self.credentials_sha256 is not None:
            _check_hex(self, ("credentials_sha256",))
        return self

    def canonical_bytes(self) -> bytes:
        return canonical_json(self.model_dump(mode="json"))


class SubmissionRecord(BaseModel):
    """Written once the scheduler accepted the job: which job runs this attempt."""

    model_config = FROZEN

    schema_version: Literal[1] = 1
    lifecycle_id: str
    job_id: str
    submitter: str
    marker: str
    submitted_at: str
    plan_sha256: str
    script_sha256: str

    @model_validator(mode="after")
    def _rules(self) -> SubmissionRecord:
        paths.name(self.lifecycle_id, "lifecycle_id")
        if not self.job_id.isdecimal() or not self.job_id.isascii():
            raise InvalidRecord(field="job_id", rule="must be a decimal job id")
        if not is_marker_of(self.marker, self.lifecycle_id):
            raise InvalidRecord(
                field="marker", rule="must be slurm-image:<lifecycle id>[;requester=<user>]"
            )
        _check_hex(self, ("plan_sha256", "script_sha256"))
        return self

    def canonical_bytes(self) -> bytes:
        return canonical_json(self.model_dump(mode="json"))


def _load(kind: type[Record], data: bytes, what: str) -> Record:
    if len(data) > RECORD_MAX_BYTES:
        raise InvalidRecord(field=what, rule=f"must be at most {RECORD_MAX_BYTES} bytes")
    try:
        record = kind.model_validate_json(data)
    except ValidationError as error:
        first = error.errors()[0]
        cause = first.get("ctx", {}).get("error")
        if isinstance(cause, DomainError):
            raise InvalidRecord(field=f"{what}.{cause.field}", rule=cause.rule) from None
        location = ".".join(str(part) for part in first["loc"])
        raise InvalidRecord(
            field=f"{what}.{location}" if location else what, rule=first["msg"]
        ) from None
    if canonical_json(record.model_dump(mode="json")) != data:
        raise InvalidRecord(field=what, rule="must be in canonical form")
    return record


def load_staged_record(data: bytes) -> StagedRecord:
    """Parse ``staged.json``. Raises ``InvalidRecord`` naming the field at fault."""
    return _load(StagedRecord, data, "staged")


def load_submission_record(data: bytes) -> SubmissionRecord:
    """Parse ``submission.json``. Raises ``InvalidRecord`` naming the field at fault."""
    return _load(SubmissionRecord, data, "submission")
