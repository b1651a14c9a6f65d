"""How a publication meets the alias it binds: the one way an entry is made (``alias_record``),
whether it may bind (``check_binding``: a new architecture joins, a bound one, another role or an
alias from before architectures needs ``replace``), the alias it leaves (``next_document``), and
when an entry is the binding already there (``same_binding``)."""

from __future__ import annotations

from slurm_image.application.errors import AliasExists, VerificationFailed
from slurm_image.domain.access import Ownership
from slurm_image.domain.plan import format_time
from slurm_image.domain.publication import (
    AliasDocument,
    AliasRecord,
    JobRun,
    RoleFacts,
    alias_schema_version,
)
from slurm_image.domain.request import Request
from slurm_image.domain.resolution import ResolvedFrom
from slurm_image.domain.signed_by import SignedBy
from slurm_image.domain.verified_chain import VerifiedChain
from slurm_image.ports.clock import Clock
from slurm_image.ports.hasher import FileDigest


def same_binding(one: AliasRecord, other: AliasRecord) -> bool:
    keys = (
        "role",
        "architecture",
        "path",
        "sqsh_sha256",
        "source_digest",
        "chain",
        "facts",
        "lifecycle_id",
    )
    return all(getattr(one, key) == getattr(other, key) for key in keys) and _same_tag(
        one.resolved_from, other.resolved_from
    )


def _same_tag(one: ResolvedFrom | None, other: ResolvedFrom | None) -> bool:
    """The same tag pinned to the same digest, whenever it was resolved."""
    if one is None or other is None:
        return one is other
    return (one.tag, one.digest) == (other.tag, other.digest)


def alias_record(
    request: Request,
    *,
    path: str,
    digest: FileDigest,
    facts: RoleFacts,
    source: str,
    source_digest: str | None,
    chain: VerifiedChain | None,
    architecture: str | None,
    signed_by: SignedBy | None,
    clock: Clock,
    job: JobRun | None = None,
) -> AliasRecord:
    """The one way an alias entry is made: ``request``'s name and role bound, for
    ``architecture``, to the file at ``path`` as hashed (``digest``), with the facts of the
    lifecycle that inspected it, the tag the request's source was resolved from, the
    signature the site policy accepted for the source, and the ``job`` it came from (none for
    an answer from the store)."""
    if architecture is None:
        raise VerificationFailed(
            field="architecture", rule="is unknown: only an image of a known one is published"
        )
    return AliasRecord(
        schema_version=alias_schema_version(request.resolved_from, signed_by, job),
        name=request.name,
        role=request.role,
        path=path,
        sqsh_sha256=digest.sha256,
        size=digest.size,
        identity=digest.identity,
        operation=request.operation,
        source=source,
        source_digest=source_digest,
        inspection_schema_version=facts.inspection_schema_version,
        inspector_version=facts.inspector_version,
        facts=facts.facts,
        lifecycle_id=facts.lifecycle_id,
        published_at=format_time(clock.now()),
        chain=chain,
        architecture=architecture,
        resolved_from=request.resolved_from,
        signed_by=signed_by,
        job=job,
    )


def check_binding(
    existing: AliasDocument | None,
    *,
    name: str,
    role: str,
    architecture: str | None,
    replace: bool,
) -> None:
    """Whether ``name`` may bind ``role`` for ``architecture``: an entry of a new architecture
    joins the others; one that rebinds an architecture, the role, or an alias published before
    architectures were recorded needs ``replace``. Raises ``AliasExists``."""
    if existing is None:
        return
    if existing.legacy or existing.role != role:
        if replace:
            return
        what = (
            f"{existing.role} image of unknown architecture (published before architectures"
            " were recorded)"
            if existing.legacy
            else f"{existing.role} image for {', '.join(map(str, existing.architectures))}"
        )
        raise AliasExists(
            field="name",
            rule=f"{name} is published already as a {what};"
            " rebind the whole alias with --replace (its artifacts stay)",
        )
    current = existing.entry(architecture)
    if current is not None and not replace:
        raise AliasExists(
            field="name",
            rule=f"{name} is published already for {architecture} (lifecycle"
            f" {current.lifecycle_id}); rebind it with --replace (its artifact stays)",
        )


def next_document(
    existing: AliasDocument | None, record: AliasRecord, replace: bool, ownership: Ownership
) -> AliasDocument:
    """The alias as publishing ``record`` leaves it (``check_binding`` says whether it may):
    with ``record`` in its architecture's place, the other architectures kept; a new alias, a
    new role or an alias from before architectures were recorded is ``record`` alone. An alias
    keeps the owner and group it has; a new one (or one from before owners were recorded)
    gets ``ownership``, the publishing request's."""
    check_binding(
        existing,
        name=record.name,
        role=record.role,
        architecture=record.architecture,
        replace=replace,
    )
    if existing is not None and existing.ownership.recorded:
        ownership = existing.ownership
    if existing is None or existing.legacy or existing.role != record.role:
        return AliasDocument.of(record, ownership=ownership)
    kept = [entry for entry in existing.entries if entry.architecture != record.architecture]
    return AliasDocument.of(*kept, record, ownership=ownership)
