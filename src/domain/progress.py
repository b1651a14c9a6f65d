"""The job's progress record (``<attempt>/progress.json``, docs/design.md, "Progress").

Written by the job as it goes (never by image code) and read by ``status``, ``wait`` and the
live display. It only says how far the job got: nothing is published on its word, and a job the
scheduler calls finished is finished whatever the file says.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, Field, ValidationError, model_validator

from slurm_image.domain.errors import DomainError, InvalidRecord
from slurm_image.domain.model_config import FROZEN
from slurm_image.domain.sizes import for_person

PROGRESS_MAX_BYTES = 4096
Phase = Literal[
    "checks", "enroot-version", "download", "extract", "squash", "hash", "inspect", "done"
]
PHASES: tuple[str, ...] = get_args(Phase)
"""In the order a job passes them (an inspect job has no download, extract or squash)."""
Counter = Field(default=None, ge=0, le=10**18)


class JobProgress(BaseModel):
    """One record: the phase, when it was written, its counters, and how the job ended."""

    model_config = FROZEN

    format: Literal[1]
    phase: Phase
    updated_at: int = Field(ge=0, le=2**40)
    layers_done: int | None = Counter
    layers_total: int | None = Counter
    bytes_done: int | None = Counter
    bytes_total: int | None = Counter
    ended: Literal["done", "failed"] | None = None
    exit_code: int | None = Field(default=None, ge=0, le=255)

    @model_validator(mode="after")
    def _rules(self) -> JobProgress:
        if (self.ended is None) != (self.exit_code is None):
            raise InvalidRecord(field="exit_code", rule="is present exactly when ended is")
        if self.ended == "done" and (self.phase != "done" or self.exit_code != 0):
            raise InvalidRecord(field="ended", rule="done only in phase done with exit code 0")
        if self.ended == "failed" and self.exit_code == 0:
            raise InvalidRecord(field="exit_code", rule="a failed job's exit code is not 0")
        for done, total in (("layers_done", "layers_total"), ("bytes_done", "bytes_total")):
            if (getattr(self, done) is None) != (getattr(self, total) is None):
                raise InvalidRecord(field=done, rule=f"comes with {total}")
        return self

    @property
    def is_ended(self) -> bool:
        return self.ended is not None

    def counters(self) -> dict[str, int]:
        """The counters the record holds (``layers_done``, ``bytes_total``, ...)."""
        names = ("layers_done", "layers_total", "bytes_done", "bytes_total")
        return {name: value for name in names if (value := getattr(self, name)) is not None}

    def describe(self) -> str:
        """The phase and its counters, for a person: ``download 1/3 layers 2.0 MB of 6.1 MB``."""
        words: list[str] = [self.phase]
        if self.layers_total is not None:
            words.append(f"{self.layers_done}/{self.layers_total} layers")
        if self.bytes_total is not None and self.bytes_done is not None:
            words.append(f"{for_person(self.bytes_done)} of {for_person(self.bytes_total)}")
        if self.ended == "failed":
            words.append(f"failed (exit {self.exit_code})")
        return " ".join(words)


def load_progress(data: bytes) -> JobProgress:
    """Parse ``progress.json``. Raises ``InvalidRecord`` naming the field at fault."""
    if len(data) > PROGRESS_MAX_BYTES:
        raise InvalidRecord(field="progress", rule=f"must be at most {PROGRESS_MAX_BYTES} bytes")
    try:
        return JobProgress.model_validate_json(data)
    except ValidationError as error:
        first = error.errors()[0]
        cause = first.get("ctx", {}).get("error")
        if isinstance(cause, DomainError):
            raise InvalidRecord(field=f"progress.{cause.field}", rule=cause.rule) from None
        location = ".".join(str(part) for part in first["loc"])
        raise InvalidRecord(
            field=f"progress.{location}" if location else "progress", rule=first["msg"]
        ) from None
