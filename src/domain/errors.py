"""Typed errors. Every error the product raises on purpose is a ``SlurmImageError``: ``field``
names what is at fault, ``rule`` what it must satisfy (or what went wrong with it), ``value``
the offending value where it helps and is no secret. Each layer keeps its own types below this
base (the domain's here, each port's in its module, the use cases' in ``application.errors``),
so every ``except`` names the layer it expects; the command line maps them all through one
table (``wire.errors``)."""

from __future__ import annotations

from typing import ClassVar

REFUSAL_RULES = (
    "source_not_allowed",
    "signature_missing",
    "signature_other_key",
    "signature_replayed",
    "signature_invalid",
    "registry_digest_mismatch",
    "registry_answer_refused",
)
"""Every ``refusal`` an error of the product names (a front end may record rules of its own):
``metrics`` counts each, zeros too, so that an alert has a series from the start."""


class SlurmImageError(Exception):
    """Base of every error the product raises: built as ``Kind(field=..., rule=..., value=...)``.

    ``refusal`` names the rule of an error that refuses what someone asked for on a site's
    word (its policy, its keys, a registry's answer that does not hold): the store's history
    records such a refusal as ``refused`` with that rule (``domain.history.REFUSAL_RULE``).
    None: no refusal of that kind (bad input, a broken profile, trouble reaching something)."""

    refusal: ClassVar[str | None] = None

    def __init__(self, *, field: str, rule: str, value: object = None) -> None:
        self.field = field
        self.rule = rule
        self.value = value
        super().__init__(f"{field}: {rule}")

    @property
    def reason(self) -> str:
        """The ``rule``, under the name the port errors have always used for it."""
        return self.rule


class DomainError(SlurmImageError, ValueError):
    """Base of every domain error: ``field`` names the input, ``rule`` says what it must satisfy."""


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


class SourceNotAllowed(InvalidRequest):
    """A source outside the policy's ``allowed_registries``."""

    refusal = "source_not_allowed"


class PlanInvariantViolation(DomainError):
    """A plan whose paths, operation or digests disagree with each other."""


class InvalidInspection(DomainError):
    """An inspection record that fails host-side validation."""


class InvalidRecord(DomainError):
    """An attempt record (``staged.json``, ``submission.json``) that is not what was written."""


class NoImageForArchitecture(DomainError):
    """An alias that has no image for the architecture asked for (or the machine's)."""


class InvalidRegistryAnswer(DomainError):
    """A registry's answer that is refused: a ``Docker-Content-Digest`` that disagrees with the
    bytes sent, an answer too large, or one that is no manifest or index an import reads."""

    refusal = "registry_answer_refused"


class RegistryDigestMismatch(InvalidRegistryAnswer):
    """A registry's ``Docker-Content-Digest`` that names other bytes than it sent: a lie."""

    refusal = "registry_digest_mismatch"


class InvalidSignatureKey(DomainError):
    """A policy key file that is no public key the product verifies with (``field``: its path)."""


class SignatureRefused(DomainError):
    """A pinned digest without a signature the policy accepts: unsigned, signed by another key,
    a signature over another digest, or signature material that is malformed (``field``: the
    digest). This class itself: the material is malformed; the others are its subclasses."""

    refusal = "signature_invalid"
    strength: ClassVar[int] = 2
    """Which refusal says most, of two for one pin (its own and its manifest's): a replay,
    then malformed material, then another key, then none at all."""


class Unsigned(SignatureRefused):
    """No signature at all (or a local ``.sqsh``, which carries none)."""

    refusal = "signature_missing"
    strength = 0


class SignedByOtherKey(SignatureRefused):
    """Signatures, none by a key of the policy."""

    refusal = "signature_other_key"
    strength = 1


class ReplayedSignature(SignatureRefused):
    """A signature by a policy key over another digest: replayed onto this one."""

    refusal = "signature_replayed"
    strength = 3


class NotAuthenticated(DomainError):
    """A request that says nothing trustworthy about who is asking: no credential, or one that
    is expired, replayed, forged, or made for another service (``field``: what carried it)."""

    refusal = "unauthenticated"


class Forbidden(DomainError):
    """A requester who may not do what was asked (``field``: the alias, lifecycle or verb;
    ``rule``: who may, e.g. naming the alias's owner)."""

    refusal = "forbidden"


class Busy(DomainError):
    """A limit of the gateway is reached (``field``: the limit); ``retry_after_s`` says when to
    ask again."""

    def __init__(self, *, field: str, rule: str, retry_after_s: int, value: object = None) -> None:
        super().__init__(field=field, rule=rule, value=value)
        self.retry_after_s = retry_after_s


class GatewayStopping(Busy):
    """The gateway is stopping (SIGTERM): what was open ends, and the client asks again."""

    def __init__(self, *, field: str, rule: str) -> None:
        super().__init__(field=field, rule=rule, retry_after_s=1)
