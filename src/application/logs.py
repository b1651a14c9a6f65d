"""The job's output and error logs (``slurm-<job id>.out`` and ``.err`` in the attempt
directory, as the plan's job spec names them), printed once or followed until the job ends."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from slurm_image.application.errors import NotSubmitted, VerificationFailed
from slurm_image.application.records import attempt_directory, read_submission, submission_claimed
from slurm_image.application.status import Statuses, is_final
from slurm_image.ports.log_files import LogFiles
from slurm_image.ports.workspace import Workspace, WorkspaceError

if TYPE_CHECKING:
    from slurm_image.application.lifecycle_rights import LifecycleRights

CHUNK = 1 << 16
FOLLOW_POLL_S = 2.0

Write = Callable[[str, bytes], None]
"""``write(path, data)``: a piece of the log at ``path``, in order."""


class Logs:
    """``logs(id, write)``: everything both logs hold now; ``follow``: then what they gain, until
    the scheduler calls the job terminal (one scheduler call every ``poll_s``), and the rest."""

    def __init__(
        self,
        workspace: Workspace,
        files: LogFiles,
        observe: Statuses,
        *,
        sleep: Callable[[float], None] = time.sleep,
        poll_s: float = FOLLOW_POLL_S,
        rights: LifecycleRights | None = None,
    ) -> None:
        self._workspace = workspace
        self._rights = rights
        self._files = files
        self._observe = observe
        self._sleep = sleep
        self._poll = poll_s

    def paths(self, lifecycle_id: str) -> Sequence[str]:
        """The attempt's two logs. Raises ``UnknownLifecycle`` (also for one ``rights`` hides)
        and ``NotSubmitted``."""
        if self._rights is not None:
            self._rights.require_seen(lifecycle_id)
        layout, _ = attempt_directory(self._workspace, lifecycle_id)
        record = read_submission(self._workspace, lifecycle_id)
        if record is None:
            why = (
                "its submission is in doubt (no job carries its marker)"
                if submission_claimed(self._workspace, lifecycle_id)
                else "it was staged and never submitted (submit it first)"
            )
            raise NotSubmitted(field="lifecycle_id", rule=f"{lifecycle_id} has no job logs: {why}")
        return layout.job_logs(record.job_id)

    def __call__(self, lifecycle_id: str, write: Write, *, follow: bool = False) -> None:
        logs = self.paths(lifecycle_id)
        offsets = dict.fromkeys(logs, 0)
        while True:
            ended = not follow or is_final(self._observe([lifecycle_id])[0])
            for path in logs:
                offsets[path] = self._drain(path, offsets[path], write)
            if ended:
                return
            self._sleep(self._poll)

    def _drain(self, path: str, offset: int, write: Write) -> int:
        while True:
            try:
                data = self._files.read_from(path, offset, CHUNK)
            except WorkspaceError as error:
                raise VerificationFailed(field=error.field, rule=error.rule) from None
            if not data:
                return offset
            write(path, data)
            offset += len(data)
