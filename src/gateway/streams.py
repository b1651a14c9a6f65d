"""The gateway's long answers (docs/gateway.md, "Limits"): a job's logs followed as
Server-Sent Events, and the long poll of ``/v1/lifecycles/wait``. Neither holds a thread while
it waits: each pass of the use case (``application.logs.LogCursor``, one ``Lifecycles.wait``
observation) runs in a thread and returns, and the pauses between passes are the event loop's.
A pass that asks the scheduler is one of its calls (``gateway.outside``): while
``max_scheduler_calls`` are under way, a long poll's first pass waits its turn (within its
timeout, then 429) and a later pass waits for the next. Each is counted against ``[gateway]
max_streams_per_user`` and ``max_streams`` while it is open, ends when its client goes away
(Starlette cancels the stream at the disconnect) and when the gateway stops.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from slurm_image.application.wait import WaitResult, pauses
from slurm_image.domain.errors import GatewayStopping
from slurm_image.domain.limits import Slots
from slurm_image.gateway.outside import SCHEDULER

if TYPE_CHECKING:
    from slurm_image.application.logs import LogCursor
    from slurm_image.gateway.outside import OutsideParts, Part
    from slurm_image.gateway.site import SiteVerbs
    from slurm_image.gateway.who import Asker

FOLLOW_POLL_S = 2.0
"""How long a followed log rests between two passes while its job runs."""
STEP_BYTES = 1 << 20
"""The most of a log one pass hands on (the rest follows at once, in the next)."""
TURN_S = 0.2
"""How often a long poll that has not yet observed anything looks for a free scheduler call."""


class LongAnswers:
    """The open log streams and long polls of one gateway: their count (``Slots``, touched only
    from the event loop), and the gateway's stop, which ends every one of them."""

    def __init__(self, per_user: int, total: int) -> None:
        self.slots = Slots(per_key=per_user, total=total)
        self._stopping: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.stopped = False

    @property
    def open(self) -> int:
        return self.slots.in_use

    def _event(self) -> asyncio.Event:
        """The stop as an event of the running loop (a gateway served again runs another)."""
        loop = asyncio.get_running_loop()
        if self._stopping is None or self._loop is not loop:
            self._stopping, self._loop = asyncio.Event(), loop
            if self.stopped:
                self._stopping.set()
        return self._stopping

    def stop(self) -> None:
        """End every long answer now (called in the event loop, at SIGTERM)."""
        self.stopped = True
        self._event().set()

    async def rest(self, seconds: float) -> bool:
        """Wait ``seconds``; True when the gateway stops meanwhile."""
        try:
            await asyncio.wait_for(self._event().wait(), timeout=max(0.0, seconds))
        except TimeoutError:
            return False
        return True

    def take(self, asker: Asker) -> Callable[[], None]:
        """One of ``asker``'s long answers (``Busy`` past the limits, ``GatewayStopping`` once
        the gateway stops), and what gives it back (once, however often it is called)."""
        if self.stopped:
            raise _stopping()
        key = asker.account.uid
        self.slots.open(key, asker.account.user)
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                self.slots.close(key)

        return release

    @asynccontextmanager
    async def slot(self, asker: Asker) -> AsyncIterator[None]:
        """One of ``asker``'s long answers for as long as the block runs (``take``)."""
        release = self.take(asker)
        try:
            yield
        finally:
            release()


class HeldStream(StreamingResponse):
    """A streamed answer that gives its slot back (``release``) however it ends: finished,
    failed, or cancelled when its client went away."""

    def __init__(
        self, content: AsyncIterator[bytes], release: Callable[[], None], media_type: str
    ) -> None:
        super().__init__(content, media_type=media_type)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


def _stopping() -> GatewayStopping:
    return GatewayStopping(field="gateway", rule="the gateway is stopping: ask again")


def _event(kind: str, data: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


async def log_events(
    answers: LongAnswers,
    outside: OutsideParts,
    parts: Collection[Part],
    cursor: LogCursor,
    error_body: Callable[[BaseException], dict[str, Any]],
) -> AsyncIterator[bytes]:
    """The events of one log stream: ``log`` (``{"path", "data_b64"}``) as the logs grow, then
    one ``end``, or one ``error`` with the error body (a failure, or the gateway stopping). Each
    pass needs ``parts`` (``gateway.outside``); one that finds them all taken rests."""
    pieces: list[bytes] = []

    def collect(path: str, data: bytes) -> None:
        encoded = base64.b64encode(data).decode()
        pieces.append(_event("log", {"path": path, "data_b64": encoded}))

    while True:
        pieces.clear()
        if not outside.free(parts):
            if await answers.rest(FOLLOW_POLL_S):
                yield _event("error", error_body(_stopping()))
                return
            continue
        try:
            done = await outside.call(parts, partial(cursor.read, collect, budget=STEP_BYTES))
        except Exception as error:  # every failure reaches the client as one error event
            for piece in pieces:
                yield piece
            yield _event("error", error_body(error))
            return
        for piece in pieces:
            yield piece
        if done:
            yield _event("end", {})
            return
        if cursor.more:
            continue
        if await answers.rest(FOLLOW_POLL_S):
            yield _event("error", error_body(_stopping()))
            return


async def long_poll(
    answers: LongAnswers,
    outside: OutsideParts,
    asker: Asker,
    lifecycles: SiteVerbs,
    ids: Sequence[str],
    timeout_s: float,
) -> WaitResult:
    """``Lifecycles.wait`` for at most ``timeout_s``, one observation per pass (``pauses``), the
    event loop resting between them; the gateway's stop answers what the last pass saw. Each
    pass is a call to the scheduler (``gateway.outside``): the first waits for a free one,
    holding no thread, within ``timeout_s`` (then ``Busy``); a later one is skipped while none
    is free."""
    observe = partial(lifecycles.wait, ids, timeout_s=0)
    async with answers.slot(asker):
        start = time.monotonic()
        schedule = pauses()
        while not outside.free(SCHEDULER) and time.monotonic() - start < timeout_s:
            left = timeout_s - (time.monotonic() - start)
            if await answers.rest(min(TURN_S, left)):
                raise _stopping()
        result = await outside.call(SCHEDULER, observe)
        while True:
            elapsed = time.monotonic() - start
            if not result.timed_out or elapsed >= timeout_s:
                return WaitResult(result.lifecycles, result.timed_out, elapsed)
            if await answers.rest(min(next(schedule), timeout_s - elapsed)):
                return WaitResult(result.lifecycles, True, time.monotonic() - start)
            if outside.free(SCHEDULER):
                result = await outside.call(SCHEDULER, observe)
