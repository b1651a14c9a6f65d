"""Typed domain errors. Each carries the field it concerns and the rule that was broken."""

from __future__ import annotations


class DomainError(ValueError):
    """Base of every domain error: ``field`` names the input, ``rule`` says what it must satisfy."""

    def __init__(self, field: str, rule: str, value: object = None) -> None:
        self.field = field
        self.rule = rule
        self.value = value
        super().__init__(f"{field}: {rule}")


class InvalidReference(DomainError):
    """An OCI reference that is not digest-pinned or not valid by the distribution grammar."""


class InvalidPath(DomainError):
    """A workspace, ``.sqsh`` or other path that breaks the path rules."""


class InvalidIdentifier(DomainError):
    """A name, lifecycle id or Slurm directive value that breaks its character rules."""


class InvalidProfile(DomainError):
    """A site profile value that breaks its rule."""


class InvalidRequest(DomainError):
    """A request (name, role, source) that breaks its rule."""


class PlanInvariantViolation(DomainError):
    """A plan whose paths, operation or digests disagree with each other."""


class InvalidInspection(DomainError):
    """An inspection record that fails host-side validation."""


class InvalidRecord(DomainError):
    """An attempt record (``staged.json``, ``submission.json``) that is not what was written."""
