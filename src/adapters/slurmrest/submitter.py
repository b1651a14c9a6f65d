"""``BatchSubmitter`` through slurmrestd.

slurmrestd ignores the script's ``#SBATCH`` lines, so every ``JobSpec`` value travels in the
JSON job description, with a minimal ``environment`` (the rendered script re-executes itself
under ``env -i`` anyway). States for many jobs come from one ``GET .../jobs``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from slurm_image.adapters.slurm_fields import bounded, is_job_id, unconfirmed
from slurm_image.adapters.slurmrest.client import Answer, RestClient, TokenSource
from slurm_image.adapters.slurmrest.errors import INVALID_PARTITION, UNPARSABLE_PATH, classify
from slurm_image.adapters.slurmrest.mapping import ApiMapping, JobRecord
from slurm_image.adapters.slurmrest.versions import discover_once, mapping_for
from slurm_image.domain.job import JobSpec, JobStatus
from slurm_image.domain.partition import PartitionLimits
from slurm_image.ports.submitter import (
    SchedulerAuthError,
    SchedulerRejected,
    SubmitterError,
    UnknownJob,
)
from slurm_image.submitters import RetryPolicy, Submitter, TransientFailure, with_retries

_log = logging.getLogger(__name__)

DEFAULT_JOB_ENVIRONMENT: Mapping[str, str] = {"PATH": "/usr/bin:/bin"}


class RestSubmitter(Submitter):
    """Submit, observe and cancel through slurmrestd.

    ``url``: ``http://host:port`` (JWT: ``user`` plus ``token_file`` or ``token_env``) or
    ``unix:///path.sock`` (local auth). ``api_version``: ``"auto"`` or one of ``SUPPORTED``.
    """

    name = "rest"
    is_job_id = staticmethod(is_job_id)

    def __init__(
        self,
        *,
        url: str,
        user: str | None = None,
        token_file: str | None = None,
        token_env: str | None = None,
        api_version: str = "auto",
        timeout_s: float = 30.0,
        retry_policy: RetryPolicy | None = None,
        job_environment: Mapping[str, str] = DEFAULT_JOB_ENVIRONMENT,
        client: RestClient | None = None,
    ) -> None:
        if client is None:
            token = None
            if url.startswith(("http://", "https://")):
                token = TokenSource(token_file=token_file, token_env=token_env)
            client = RestClient(url, user=user, token=token, timeout_s=timeout_s)
        super().__init__(retry_policy=retry_policy)
        self._client = client
        self._environment = dict(job_environment)
        self._mapping: ApiMapping | None = (
            None if api_version == "auto" else mapping_for(api_version)
        )

    def __repr__(self) -> str:
        version = self._mapping.version if self._mapping else "auto"
        return f"RestSubmitter({self._client!r}, api_version={version!r})"

    @property
    def api_version(self) -> str:
        return self._api().version

    # -- one request each ----------------------------------------------------------------

    def _api(self) -> ApiMapping:
        if self._mapping is None:
            self._mapping = with_retries(
                self.retry_policy, "discover API version", lambda: discover_once(self._client)
            )
            _log.info("slurmrestd at %s speaks %s", self._client.url, self._mapping.version)
        return self._mapping

    def _check(self, operation: str, answer: Answer, *, sent: bool) -> None:
        errors = self._api().errors(answer.body or {})
        error = classify(operation, answer.status, errors, answer.text, sent=sent)
        if error is None and answer.body is None:
            error = TransientFailure(
                f"{operation}: HTTP {answer.status} without a JSON body: {answer.text!r}",
                "slurmrestd",
                ambiguous=sent,
            )
        if error is not None:
            raise error

    def submit_once(self, script: bytes, spec: JobSpec) -> str:
        try:
            text = script.decode("utf-8")
        except UnicodeDecodeError:
            raise SchedulerRejected(field="script", rule="the script is not UTF-8 text") from None
        api = self._api()
        body = api.submit_body(text, spec, self._environment)
        answer = self._client.request("POST", api.submit_path(), body, sent=True)
        try:
            self._check("submit", answer, sent=True)
        except UnknownJob as exc:  # 2017 cannot mean an unknown job on submit
            raise SchedulerRejected(field="job", rule=exc.reason) from None
        try:
            return api.submitted_job_id(answer.body or {})
        except SchedulerRejected as unusable:  # accepted: the job may exist
            raise unconfirmed(unusable, spec.comment) from None

    def states_once(self, job_ids: Sequence[str]) -> Mapping[str, JobStatus]:
        wanted = set(job_ids)
        return {r.status.job_id: r.status for r in self._jobs_once() if r.status.job_id in wanted}

    def _jobs_once(self) -> list[JobRecord]:
        api = self._api()
        answer = self._client.request("GET", api.jobs_path(), sent=False)
        self._check("list jobs", answer, sent=False)
        return api.job_records(answer.body or {})

    def cancel_once(self, job_id: str) -> None:
        api = self._api()
        answer = self._client.request("DELETE", api.job_path(job_id), sent=True)
        if answer.status == UNPARSABLE_PATH:  # 24.11: the ids Slurm reserves (NO_VAL, INFINITE)
            reason = f"cancel {job_id}: slurmrestd refuses the id: {answer.text}"
            raise UnknownJob(field="job_id", rule=reason)
        self._check(f"cancel {job_id}", answer, sent=True)
        if not api.cancel_names_unknown_jobs:  # only a look-up tells an unknown job apart
            found = self._client.request("GET", api.job_path(job_id), sent=False)
            self._check(f"cancel {job_id}", found, sent=False)

    def find_once(self, marker: str) -> str | None:
        for record in self._jobs_once():
            if record.comment == marker:
                return record.status.job_id
        return None

    def ping_once(self) -> str:
        api = self._api()
        answer = self._client.request("GET", api.ping_path(), sent=False)
        self._check("ping", answer, sent=False)
        controllers = api.controllers(answer.body or {})
        up = [text for text, responding in controllers if responding]
        if up:
            return "; ".join(up)
        # slurmrestd 24.11 answers /ping with a refused token as 200 and every controller DOWN;
        # a read that needs the token tells that apart: its auth error is the answer, any other
        # failure leaves the ping's own report.
        try:
            nodes = self._client.request("GET", api.nodes_path(), sent=False)
            self._check("ping", nodes, sent=False)
        except SchedulerAuthError:
            raise
        except (TransientFailure, SubmitterError):
            pass
        said = "; ".join(text for text, _ in controllers) or "no controller in the answer"
        raise TransientFailure(f"ping: {bounded(said)}", "controller", ambiguous=False)

    def partition_once(self, name: str) -> PartitionLimits | None:
        api = self._api()
        answer = self._client.request("GET", api.partition_path(name), sent=False)
        if _names_no_partition(answer.body or {}):
            return None
        self._check(f"partition {name}", answer, sent=False)
        nodes = self._client.request("GET", api.nodes_path(), sent=False)
        self._check("nodes", nodes, sent=False)
        return api.partition_limits(answer.body or {}, nodes.body or {}, name)


def _names_no_partition(body: dict[str, object]) -> bool:
    """Whether an answer says the partition does not exist: 22.05 answers HTTP 500 with
    ``{"error": "Invalid partition name specified", "errno": 2000}``, 24.11 HTTP 422 with
    ``{"error_number": 9000, "description": "Unable to find partition NAME"}``."""
    for entry in body.get("errors") or []:  # type: ignore[attr-defined]
        if not isinstance(entry, dict):
            continue
        codes = {entry.get(key) for key in ("errno", "error_number", "error_code")}
        if INVALID_PARTITION in codes or "invalid partition" in str(entry.get("error", "")).lower():
            return True
        if str(entry.get("description", "")).lower().startswith("unable to find partition"):
            return True
    return False
