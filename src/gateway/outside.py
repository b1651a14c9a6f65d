"""The gateway's calls to the parts outside it (docs/gateway.md, "Limits"): a registry, asked to
resolve a tag, check an import's signatures or say what is outdated; and the scheduler, asked to
submit, observe or cancel a job. Each part has a limit of its own on the calls under way
(``[gateway] max_registry_calls``, ``max_scheduler_calls``); a request past it is refused at once
(429, ``Retry-After``, naming the setting) instead of waiting behind calls that may not end
until their own timeouts. Their threads are not the thread pool's that the store's reads use, so
a registry or scheduler that stops answering slows only the requests that need it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Literal, TypeVar

from anyio import CapacityLimiter, to_thread
from starlette.concurrency import run_in_threadpool

from slurm_image.domain.errors import Busy
from slurm_image.domain.limits import Slots

Part = Literal["registry", "scheduler"]
REGISTRY: tuple[Part, ...] = ("registry",)
SCHEDULER: tuple[Part, ...] = ("scheduler",)
STORE: tuple[Part, ...] = ()
"""What a call that reads or writes the store alone needs: none of the parts, the thread pool's
threads."""

T = TypeVar("T")


def _slots(limit: int, what: str, setting: str) -> Slots:
    return Slots(per_key=limit, total=limit, what=what, per_key_field=setting, total_field=setting)


class OutsideParts:
    """The calls under way to each part (``Slots``, touched only from the event loop) and the
    threads they run in."""

    def __init__(self, registry_calls: int, scheduler_calls: int) -> None:
        self.slots: dict[Part, Slots] = {
            "registry": _slots(
                registry_calls, "calls to registries under way", "max_registry_calls"
            ),
            "scheduler": _slots(
                scheduler_calls, "calls to the scheduler under way", "max_scheduler_calls"
            ),
        }
        self.threads = CapacityLimiter(registry_calls + scheduler_calls)
        """Never waited on: each call holds a slot of at least one part first."""

    def under_way(self, part: Part) -> int:
        return self.slots[part].in_use

    @property
    def busy_threads(self) -> int:
        return int(self.threads.borrowed_tokens)

    def free(self, parts: Collection[Part]) -> bool:
        """Whether a call needing ``parts`` would be taken now."""
        return all(self.slots[part].in_use < self.slots[part].total for part in parts)

    def take(self, parts: Collection[Part]) -> Callable[[], None]:
        """A slot of each of ``parts`` (``Busy`` naming the first part's setting that is full,
        nothing taken), and what gives them back."""
        taken: list[Part] = []
        try:
            for part in parts:
                self.slots[part].open(part, "the gateway")
                taken.append(part)
        except Busy:
            for part in taken:
                self.slots[part].close(part)
            raise

        def release() -> None:
            for part in taken:
                self.slots[part].close(part)
            taken.clear()

        return release

    async def call(self, parts: Collection[Part], work: Callable[[], T]) -> T:
        """``work`` in a thread, holding a slot of each of ``parts`` until it returns (a call
        whose client went away still holds them: its thread runs on); ``Busy`` at once when a
        part has none left. With no part (``STORE``), in the thread pool."""
        if not parts:
            return await run_in_threadpool(work)
        release = self.take(parts)
        try:
            return await to_thread.run_sync(work, limiter=self.threads)
        finally:
            release()


def parts_of_start(operation: str, *, submit: bool) -> tuple[Part, ...]:
    """What starting a lifecycle may ask: an import, a registry (its tag resolved, its
    signatures checked); a submission, the scheduler."""
    return (REGISTRY if operation == "import_oci" else STORE) + (SCHEDULER if submit else STORE)
