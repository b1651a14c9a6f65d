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

    def open(self, lifecycle_id: str, *, follow: bool = False) -> LogCursor:
        """A reader of the attempt's two logs from their start (``LogCursor``). Raises
        ``UnknownLifecycle`` and ``NotSubmitted`` before anything is read."""
        return LogCursor(self, lifecycle_id, self.paths(lifecycle_id), follow=follow)

    def __call__(self, lifecycle_id: str, write: Write, *, follow: bool = False) -> None:
        cursor = self.open(lifecycle_id, follow=follow)
        while not cursor.read(write):
            if not cursor.more:
                self._sleep(self._poll)

    def ended(self, lifecycle_id: str) -> bool:
        return is_final(self._observe([lifecycle_id])[0])

    def drain(self, path: str, offset: int, write: Write, budget: int | None) -> tuple[int, bool]:
        """Hand on what ``path`` holds past ``offset``, at most ``budget`` bytes (None: all):
        the new offset, and whether the end was reached."""
        handed = 0
        while budget is None or handed < budget:
            size = CHUNK if budget is None else min(CHUNK, budget - handed)
            try:
                data = self._files.read_from(path, offset, size)
            except WorkspaceError as error:
                raise VerificationFailed(field=error.field, rule=error.rule) from None
            if not data:
                return offset, True
            write(path, data)
            offset += len(data)
            handed += len(data)
        return offset, False


class LogCursor:
    """Where a reader of one lifecycle's logs stands. Each ``read`` is one pass that waits for
    nothing: with ``follow``, one scheduler call (until it has called the job terminal), then
    what both logs gained since the last pass, at most ``budget`` bytes (``more`` when some was
    left for the next pass); True once everything is handed on and nothing more will come.
    A reader that must not hold a thread while the job runs (the gateway) sleeps between
    passes itself."""

    def __init__(self, logs: Logs, lifecycle_id: str, paths: Sequence[str], *, follow: bool):
        self._logs = logs
        self._id = lifecycle_id
        self._offsets = dict.fromkeys(paths, 0)
        self._follow = follow
        self._final = False
        self.more = False

    def read(self, write: Write, *, budget: int | None = None) -> bool:
        if not self._final and not self.more:
            self._final = not self._follow or self._logs.ended(self._id)
        complete = True
        for path, offset in self._offsets.items():
            left = None if budget is None else budget
            self._offsets[path], drained = self._logs.drain(path, offset, write, left)
            complete = complete and drained
            if budget is not None:
                budget = max(0, budget - (self._offsets[path] - offset))
        self.more = not complete
        return self._final and complete
