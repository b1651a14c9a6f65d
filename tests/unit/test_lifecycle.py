"""The lifecycle's order of steps (application/lifecycle.py), with stand-ins for each step:
what runs, in which order, and what never runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from publish_support import SOURCE, SOURCE_DIGEST
from slurm_image.application.errors import JobNotSuccessful
from slurm_image.application.lifecycle import Lifecycle, LifecycleOptions
from slurm_image.application.status import LifecycleStatus
from slurm_image.application.wait import WaitResult
from slurm_image.domain.errors import InvalidProfile, InvalidRequest
from slurm_image.domain.job import JobState
from slurm_image.domain.lifecycle_state import LifecycleState
from slurm_image.domain.policy import Policy
from slurm_image.domain.request import Request, make_request
from slurm_image.ports.submitter import SchedulerRejected

ID = "img-" + "1" * 32
ROOT = "/srv/ws"
SQSH_SHA = "a" * 64


@dataclass
class Steps:
    """Every step a lifecycle may take, recording the order they ran in."""

    calls: list[str] = field(default_factory=list)
    preflight_error: Exception | None = None
    submit_error: Exception | None = None
    job_state: JobState = JobState.COMPLETED
    stored_roles: tuple[str, ...] | None = None
    stored_signed_by: Any = None
    trusted: bool = True
    staged: list[Request] = field(default_factory=list)

    def lifecycle(self) -> Lifecycle:
        def built(name: str, step: Any) -> Any:
            def build() -> Any:
                self.calls.append(f"build {name}")
                return step

            return build

        return Lifecycle(
            prepare=built("prepare", self.prepare),
            submit=built("submit", self.submit),
            wait=built("wait", self.wait),
            publish=built("publish", self),
            require_submitter=self.require_submitter,
            check_signature=built("signature check", self),
        )

    def satisfies(self, signed_by: Any, profile: Any) -> bool:
        self.calls.append("check the stored signature")
        return signed_by is not None and self.trusted

    def require_submitter(self) -> None:
        self.calls.append("preflight")
        if self.preflight_error is not None:
            raise self.preflight_error

    def prepare(
        self, request: Request, profile: Any, selection: Any, given_credentials: Any = None
    ) -> Any:
        self.calls.append(f"stage {request.operation}")
        self.staged.append(request)
        return SimpleNamespace(lifecycle_id=ID, job_directory=f"{ROOT}/images/.tmp/jobs/{ID}")

    def submit(self, prepared: Any) -> Any:
        self.calls.append("submit")
        if self.submit_error is not None:
            raise self.submit_error
        return SimpleNamespace(lifecycle_id=ID, job_id="42")

    def wait(self, ids: list[str], *, timeout_s: float | None, on_poll: Any) -> WaitResult:
        self.calls.append("wait")
        status = LifecycleStatus(ID, "42", self.job_state, exit_code=0)
        return WaitResult([status], timed_out=False, elapsed_s=1.0)

    def __call__(self, lifecycle_id: str, *, replace: bool) -> Any:
        self.calls.append("publish")
        return SimpleNamespace(record=SimpleNamespace(lifecycle_id=lifecycle_id))

    def stored_source(self, digest: str, architecture: str) -> Any:
        self.calls.append(f"ask the store for {architecture}")
        assert digest == f"sha256:{SOURCE_DIGEST}"
        if self.stored_roles is None:
            return None
        return SimpleNamespace(
            sqsh_sha256=SQSH_SHA,
            roles=dict.fromkeys(self.stored_roles),
            signed_by=self.stored_signed_by,
            private_group=None,
        )

    def bind_stored(self, request: Request, source: Any, *, replace: bool) -> Any:
        self.calls.append("bind from the store")
        return SimpleNamespace(record=SimpleNamespace(lifecycle_id="img-" + "0" * 32))


PROFILE: Any = SimpleNamespace(
    workspace_root=ROOT, image_build=SimpleNamespace(arch=None), policy=None
)
REQUEST = make_request(
    "import_oci", name="app", role="client", source=SOURCE, architecture="aarch64"
)


def _run(steps: Steps, request: Request = REQUEST, profile: Any = PROFILE, **options: Any) -> Any:
    return steps.lifecycle()(request, profile, None, LifecycleOptions(**options))


def test_only_staging_checks_no_submitter_and_builds_nothing_of_the_schedulers_side() -> None:
    steps = Steps(preflight_error=InvalidProfile(field="submitter.kind", rule="unknown"))
    outcome = _run(steps, submit=False)
    assert (outcome.state, outcome.job_id) == (LifecycleState.STAGED, None)
    assert steps.calls == ["build prepare", "stage import_oci"]


def test_a_submitter_that_cannot_work_is_refused_before_anything_is_staged() -> None:
    steps = Steps(preflight_error=InvalidProfile(field="submitter.kind", rule="unknown"))
    with pytest.raises(InvalidProfile):
        _run(steps)
    assert steps.calls == ["preflight"]


def test_a_failed_submission_leaves_the_attempt_staged_and_says_how_to_retry() -> None:
    steps = Steps(submit_error=SchedulerRejected(field="partition", rule="no such partition"))
    with pytest.raises(SchedulerRejected) as refused:
        _run(steps)
    assert refused.value.__notes__ == [
        f"lifecycle {ID} stays staged in {ROOT}/images/.tmp/jobs/{ID};"
        f" retry with: slurm-image submit {ID}"
    ]
    assert steps.calls[-1] == "submit"


def test_a_waited_lifecycle_is_staged_submitted_waited_for_and_published_in_that_order() -> None:
    steps = Steps()
    outcome = _run(steps, wait=True)
    assert outcome.state == LifecycleState.PUBLISHED and not outcome.from_store
    assert [call for call in steps.calls if not call.startswith("build")] == [
        "preflight",
        "ask the store for aarch64",
        "stage import_oci",
        "submit",
        "wait",
        "publish",
    ]


def test_a_failed_job_is_not_published() -> None:
    steps = Steps(job_state=JobState.FAILED)
    with pytest.raises(JobNotSuccessful):
        _run(steps, wait=True)
    assert "publish" not in steps.calls


def test_an_import_the_store_holds_with_facts_for_the_role_runs_no_job() -> None:
    steps = Steps(stored_roles=("client",))
    outcome = _run(steps, wait=True)
    assert (outcome.state, outcome.from_store) == (LifecycleState.PUBLISHED, True)
    assert [call for call in steps.calls if not call.startswith("build")] == [
        "preflight",
        "ask the store for aarch64",
        "bind from the store",
    ]


def test_an_import_the_store_holds_without_facts_for_the_role_inspects_the_stored_artifact() -> (
    None
):
    steps = Steps(stored_roles=("serving",))
    outcome = _run(steps)
    assert outcome.state == LifecycleState.SUBMITTED
    (staged,) = steps.staged
    assert (staged.operation, staged.source) == (
        "inspect_sqsh",
        f"{ROOT}/images/artifacts/{SQSH_SHA}.sqsh",
    )
    assert (staged.name, staged.role, staged.architecture) == ("app", "client", "aarch64")


def test_an_import_for_the_nodes_architecture_never_asks_the_store() -> None:
    steps = Steps(stored_roles=("client",))
    request = make_request("import_oci", name="app", role="client", source=SOURCE)
    outcome = _run(steps, request)
    assert outcome.state == LifecycleState.SUBMITTED
    assert not [call for call in steps.calls if call.startswith("ask the store")]
    assert steps.staged == [request]


def test_the_profiles_architecture_is_the_one_the_store_is_asked_for() -> None:
    steps = Steps(stored_roles=("client",))
    request = make_request("import_oci", name="app", role="client", source=SOURCE)
    profile = SimpleNamespace(
        workspace_root=ROOT, image_build=SimpleNamespace(arch="ppc64le"), policy=None
    )
    outcome = _run(steps, request, profile)
    assert outcome.from_store
    assert "ask the store for ppc64le" in steps.calls


def test_force_imports_what_the_store_could_answer() -> None:
    steps = Steps(stored_roles=("client",))
    outcome = _run(steps, force=True)
    assert outcome.state == LifecycleState.SUBMITTED
    assert not [call for call in steps.calls if call.startswith("ask the store")]
    assert steps.staged == [REQUEST]


def signed_profile(**policy: Any) -> Any:
    table = {"require_signature": True, "keys": ["/k/site.pub"], **policy}
    return SimpleNamespace(
        workspace_root=ROOT,
        image_build=SimpleNamespace(arch=None),
        policy=Policy.model_validate(table),
    )


def test_under_require_signature_a_stored_source_signed_by_a_trusted_key_answers() -> None:
    steps = Steps(stored_roles=("client",), stored_signed_by=object())
    outcome = _run(steps, profile=signed_profile(), wait=True)
    assert outcome.from_store
    assert "check the stored signature" in steps.calls
    assert steps.staged == []


@pytest.mark.parametrize(
    ("signed_by", "trusted"), [(None, True), (object(), False)], ids=["unsigned", "key-removed"]
)
def test_under_require_signature_a_stored_source_without_a_trusted_signature_imports_again(
    signed_by: Any, trusted: bool
) -> None:
    steps = Steps(stored_roles=("client",), stored_signed_by=signed_by, trusted=trusted)
    outcome = _run(steps, profile=signed_profile(), wait=True)
    assert not outcome.from_store
    assert "bind from the store" not in steps.calls
    assert [request.operation for request in steps.staged] == ["import_oci"]


def test_a_source_outside_allowed_registries_is_refused_before_the_store_is_asked() -> None:
    steps = Steps(stored_roles=("client",))
    profile = signed_profile(allowed_registries=["nvcr.io"])
    with pytest.raises(InvalidRequest, match=r"policy\.allowed_registries"):
        _run(steps, profile=profile, wait=True)
    assert not any(call.startswith("ask the store") for call in steps.calls)


def test_the_stored_artifact_of_a_signed_source_is_inspected_under_the_policy() -> None:
    steps = Steps(stored_roles=("serving",), stored_signed_by=object())
    _run(steps, profile=signed_profile(), wait=True)
    (staged,) = steps.staged
    assert staged.operation == "inspect_sqsh"
    assert staged.unsigned_ok is True
