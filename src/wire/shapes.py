"""The gateway's JSON (docs/gateway.md, "The API"): how the verbs' results travel between
``slurm-image serve`` and the command line that asks it, written by one side and read back into
the same types by the other, so that the command line prints a remote answer exactly as a local
one. Every ``*_json`` has its ``*_from``; the contract suite (tests/contract/
test_lifecycles_contract.py) holds the pairs to that.

What comes back from a gateway is read through the domain's own models (an alias record, a plan,
a history event are validated as when they are read from the store).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slurm_image.application.lifecycle import Outcome
    from slurm_image.application.maintain import Removed
    from slurm_image.application.outdated import OutdatedEntry
    from slurm_image.application.prepare import PlannedLifecycle
    from slurm_image.application.resolve import Resolution
    from slurm_image.application.status import LifecycleStatus
    from slurm_image.application.submit import Submission
    from slurm_image.application.wait import WaitResult
    from slurm_image.domain.by_name import StablePath
    from slurm_image.domain.history import HistoryRead
    from slurm_image.domain.job import JobState
    from slurm_image.domain.lifecycle_state import LifecycleState
    from slurm_image.domain.listing import SummaryPage
    from slurm_image.domain.publication import AliasRecord
    from slurm_image.domain.published import PublishedAlias
    from slurm_image.wire.remote_error import RemoteError

Json = dict[str, Any]


def _text(data: Json, key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value


def _optional_text(data: Json, key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key} must be a string or null")
    return value


def _optional_int(data: Json, key: str) -> int | None:
    value = data.get(key)
    if value is not None and type(value) is not int:
        raise ValueError(f"{key} must be an integer or null")
    return value


def state_from(text: str) -> LifecycleState | JobState:
    from slurm_image.domain.job import JobState
    from slurm_image.domain.lifecycle_state import LifecycleState

    if text in LifecycleState.__members__:
        return LifecycleState(text)
    return JobState(text)


# -- alias records -------------------------------------------------------------------------


def alias_record_json(record: AliasRecord) -> Json:
    return record.model_dump(mode="json")


def alias_record_from(data: Json) -> AliasRecord:
    from slurm_image.domain.publication import AliasRecord

    return AliasRecord.model_validate(data, strict=False)


def published_json(published: PublishedAlias) -> Json:
    return {
        "record": dict(published.record),
        "architectures": list(published.architectures),
        "owned": {
            "user": published.owned.user,
            "uid": published.owned.uid,
            "group": published.owned.group,
            "private": published.owned.private,
        },
    }


def published_from(data: Json) -> PublishedAlias:
    from slurm_image.domain.published import Owned, PublishedAlias

    owned = data.get("owned") or {}
    record = data.get("record")
    architectures = data.get("architectures")
    if not isinstance(record, dict) or not isinstance(architectures, list):
        raise ValueError("a published alias is a record and its architectures")
    return PublishedAlias(
        record=record,
        architectures=tuple(architectures),
        owned=Owned(
            user=_optional_text(owned, "user"),
            uid=_optional_int(owned, "uid"),
            group=_optional_text(owned, "group"),
            private=owned.get("private") is True,
        ),
    )


def summary_page_json(page: SummaryPage) -> Json:
    return {"images": list(page.images), "next": page.next}


def summary_page_from(data: Json, after: str | None) -> SummaryPage:
    """A page of ``list``'s summaries asked for ``after``: every summary an object naming its
    alias, and a ``next`` that comes after the page's start."""
    from slurm_image.domain.listing import LISTING_KEYS, SummaryPage

    images = data.get("images")
    if not isinstance(images, list):
        raise ValueError("images must be a list")
    for image in images:
        if not isinstance(image, dict) or not isinstance(image.get("name"), str):
            raise ValueError("each image must be an object naming its alias")
        if not set(LISTING_KEYS) <= set(image):
            raise ValueError(f"each image must hold {', '.join(LISTING_KEYS)}")
    following = _optional_text(data, "next")
    if following is not None and after is not None and following <= after:
        raise ValueError("next must come after the page's start")
    return SummaryPage(tuple(images), next=following)


# -- lifecycles ----------------------------------------------------------------------------


def outcome_json(outcome: Outcome) -> Json:
    return {
        "lifecycle_id": outcome.lifecycle_id,
        "state": str(outcome.state),
        "job_id": outcome.job_id,
        "job_directory": outcome.job_directory,
        "published": (
            alias_record_json(outcome.published) if outcome.published is not None else None
        ),
        "from_store": outcome.from_store,
        "joined": outcome.joined,
    }


def outcome_from(data: Json) -> Outcome:
    from slurm_image.application.lifecycle import Outcome
    from slurm_image.domain.lifecycle_state import LifecycleState

    published = data.get("published")
    return Outcome(
        lifecycle_id=_text(data, "lifecycle_id"),
        state=LifecycleState(_text(data, "state")),
        job_id=_optional_text(data, "job_id"),
        job_directory=_optional_text(data, "job_directory"),
        published=alias_record_from(published) if isinstance(published, dict) else None,
        from_store=data.get("from_store") is True,
        joined=data.get("joined") is True,
    )


def status_json(status: LifecycleStatus) -> Json:
    progress = status.progress
    return {
        "lifecycle_id": status.lifecycle_id,
        "job_id": status.job_id,
        "state": str(status.state),
        "reason": status.reason,
        "exit_code": status.exit_code,
        "progress": progress.model_dump(mode="json") if progress is not None else None,
        "progress_error": status.progress_error,
    }


def status_from(data: Json) -> LifecycleStatus:
    from slurm_image.application.status import LifecycleStatus
    from slurm_image.domain.progress import JobProgress

    progress = data.get("progress")
    return LifecycleStatus(
        lifecycle_id=_text(data, "lifecycle_id"),
        job_id=_optional_text(data, "job_id"),
        state=state_from(_text(data, "state")),
        reason=_optional_text(data, "reason"),
        exit_code=_optional_int(data, "exit_code"),
        progress=(
            JobProgress.model_validate(progress, strict=False)
            if isinstance(progress, dict)
            else None
        ),
        progress_error=_optional_text(data, "progress_error"),
    )


def wait_json(result: WaitResult) -> Json:
    return {
        "lifecycles": [status_json(status) for status in result.lifecycles],
        "timed_out": result.timed_out,
        "elapsed_s": result.elapsed_s,
    }


def wait_from(data: Json) -> WaitResult:
    from slurm_image.application.wait import WaitResult

    statuses = data.get("lifecycles")
    if not isinstance(statuses, list):
        raise ValueError("lifecycles must be a list")
    elapsed = data.get("elapsed_s")
    return WaitResult(
        lifecycles=[status_from(status) for status in statuses],
        timed_out=data.get("timed_out") is True,
        elapsed_s=float(elapsed) if isinstance(elapsed, int | float) else 0.0,
    )


def submission_json(submission: Submission) -> Json:
    return {
        "lifecycle_id": submission.lifecycle_id,
        "job_id": submission.job_id,
        "record": submission.record.model_dump(mode="json"),
    }


def submission_from(data: Json) -> Submission:
    from slurm_image.application.submit import Submission
    from slurm_image.domain.attempt import SubmissionRecord

    record = data.get("record")
    return Submission(
        lifecycle_id=_text(data, "lifecycle_id"),
        job_id=_text(data, "job_id"),
        record=SubmissionRecord.model_validate(record, strict=False),
    )


def planned_json(planned: PlannedLifecycle) -> Json:
    """A plan and its script; never the credentials it would stage."""
    return {"plan": planned.plan.model_dump(mode="json"), "script": planned.script}


def planned_from(data: Json) -> PlannedLifecycle:
    from slurm_image.application.prepare import PlannedLifecycle
    from slurm_image.domain.plan import Plan

    return PlannedLifecycle(
        plan=Plan.model_validate(data.get("plan"), strict=False), script=_text(data, "script")
    )


# -- tags ----------------------------------------------------------------------------------


def resolution_json(resolution: Resolution) -> Json:
    return {
        "reference": resolution.reference.model_dump(mode="json"),
        "manifest": resolution.manifest.model_dump(mode="json"),
        "resolved_at": resolution.resolved_at,
        "architecture": resolution.architecture,
        "arch_manifest": resolution.arch_manifest,
    }


def resolution_from(data: Json) -> Resolution:
    from slurm_image.application.resolve import Resolution
    from slurm_image.domain.manifest import RegistryManifest
    from slurm_image.domain.reference import TagReference

    return Resolution(
        reference=TagReference.model_validate(data.get("reference"), strict=False),
        manifest=RegistryManifest.model_validate(data.get("manifest"), strict=False),
        resolved_at=_text(data, "resolved_at"),
        architecture=_optional_text(data, "architecture"),
        arch_manifest=_optional_text(data, "arch_manifest"),
    )


def outdated_json(entry: OutdatedEntry) -> Json:
    data = entry.as_dict()
    if entry.error is not None:
        from slurm_image.wire.errors import exit_code_for

        data["error"] = {
            "field": entry.error.field,
            "rule": entry.error.rule,
            "exit_code": exit_code_for(entry.error),
        }
    return data


def outdated_from(data: Json) -> OutdatedEntry:
    from slurm_image.application.outdated import OutdatedEntry, TagState

    error = data.get("error")
    return OutdatedEntry(
        name=_text(data, "name"),
        architecture=_optional_text(data, "architecture"),
        role=_text(data, "role"),
        state=TagState(_text(data, "state")),
        tag=_optional_text(data, "tag"),
        pinned=_optional_text(data, "pinned"),
        new_pin=_optional_text(data, "new_pin"),
        manifest=_optional_text(data, "manifest"),
        reason=_optional_text(data, "reason"),
        error=remote_error_from(error) if isinstance(error, dict) else None,
    )


# -- the store -----------------------------------------------------------------------------


def history_json(read: HistoryRead) -> Json:
    return {
        "events": [event.model_dump(mode="json") for event in read.events],
        "skipped": read.skipped,
    }


def history_from(data: Json) -> HistoryRead:
    from slurm_image.domain.history import HistoryEvent, HistoryRead

    events = data.get("events")
    if not isinstance(events, list):
        raise ValueError("events must be a list")
    skipped = data.get("skipped")
    return HistoryRead(
        events=tuple(HistoryEvent.model_validate(event, strict=False) for event in events),
        skipped=skipped if type(skipped) is int else 0,
    )


def removed_json(removed: Removed) -> Json:
    return removed.as_dict()


def removed_from(data: Json) -> Removed:
    from slurm_image.application.maintain import Removed

    return Removed(kind=_text(data, "kind"), path=_text(data, "path"))


def stable_path_from(data: Any) -> StablePath:
    from slurm_image.domain.by_name import StablePath

    architecture = data["architecture"]
    if architecture is not None and not isinstance(architecture, str):
        raise TypeError("architecture")
    fields = {key: data[key] for key in ("name", "path", "pinned")}
    if not all(isinstance(value, str) for value in fields.values()):
        raise TypeError("path")
    return StablePath(architecture=architecture, **fields)


# -- errors --------------------------------------------------------------------------------


def error_json(field: str, rule: str, exit_code: int) -> Json:
    """The one error body of every refusal (docs/gateway.md, "Errors")."""
    return {"error": {"field": field, "rule": rule, "exit_code": exit_code}}


def remote_error_from(data: Json) -> RemoteError:
    from slurm_image.wire.remote_error import RemoteError

    code = data.get("exit_code")
    return RemoteError(
        field=str(data.get("field") or "gateway"),
        rule=str(data.get("rule") or "refused"),
        exit_code=code if type(code) is int and 0 < code < 128 else 1,
    )
