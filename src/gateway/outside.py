"""The gateway's calls to the parts outside it (docs/gateway.md, "Limits"): a registry, asked to
resolve a tag, check an import's signatures or say what is outdated; and the scheduler, asked to
submit, observe or cancel a job. Each part has a limit of its own on the calls under way
(``[gateway] max_registry_calls``, ``max_scheduler_calls``), and each registry host one within
the registries' (``max_calls_per_registry``); a request past it is refused at once (429,
``Retry-After``, naming the setting) instead of waiting behind calls that may not end until
their own timeouts. Their threads are not the thread pool's that the store's reads use, so a
registry or scheduler that stops answering slows only the requests that need it, and one
registry that stops answering leaves the others theirs.
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


SEVERAL_REGISTRIES = ""
"""The key of a call that may ask several registries (``outdated``), or none it names: counted
as one registry of its own."""


class OutsideParts:
    """The calls under way to each part (``Slots``, touched only from the event loop; the
    registries' keyed by host) and the threads they run in."""

    def __init__(
        self, registry_calls: int, scheduler_calls: int, calls_per_registry: int | None = None
    ) -> None:
        per_registry = min(calls_per_registry or registry_calls, registry_calls)
        self.slots: dict[Part, Slots] = {
            "registry": Slots(
                per_key=per_registry,
                total=registry_calls,
                what="calls to registries under way",
                per_key_field="max_calls_per_registry"
                if per_registry < registry_calls
                else "max_registry_calls",
                total_field="max_registry_calls",
            ),
            "scheduler": Slots(
                per_key=scheduler_calls,
                total=scheduler_calls,
                what="calls to the scheduler under way",
                per_key_field="max_scheduler_calls",
                total_field="max_scheduler_calls",
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

    def take(
        self, parts: Collection[Part], registry: str | None = SEVERAL_REGISTRIES
    ) -> Callable[[], None]:
        """A slot of each of ``parts`` (the registries' one of ``registry``'s; ``Busy`` naming
        the first setting that is full, nothing taken), and what gives them back."""
        taken: list[tuple[Part, str]] = []
        try:
            for part in parts:
                key = (registry or SEVERAL_REGISTRIES) if part == "registry" else part
                self.slots[part].open(key, _asker(part, key))
                taken.append((part, key))
        except Busy:
            for part, key in taken:
                self.slots[part].close(key)
            raise

        def release() -> None:
            for part, key in taken:
                self.slots[part].close(key)
            taken.clear()

        return release

    async def call(
        self,
        parts: Collection[Part],
        work: Callable[[], T],
        registry: str | None = SEVERAL_REGISTRIES,
    ) -> T:
        """``work`` in a thread, holding a slot of each of ``parts`` (of the registries', the
        host ``registry``'s) until it returns (a call whose client went away still holds them:
        its thread runs on); ``Busy`` at once when a part has none left. With no part
        (``STORE``), in the thread pool."""
        if not parts:
            return await run_in_threadpool(work)
        release = self.take(parts, registry)
        try:
            return await to_thread.run_sync(work, limiter=self.threads)
        finally:
            release()


def _asker(part: Part, key: str) -> str:
    if part != "registry":
        return "the gateway"
    return f"registry {key}" if key else "the calls that ask several registries"


def parts_of_start(operation: str, *, submit: bool) -> tuple[Part, ...]:
    """What starting a lifecycle may ask: an import, a registry (its tag resolved, its
    signatures checked); a submission, the scheduler."""
    return (REGISTRY if operation == "import_oci" else STORE) + (SCHEDULER if submit else STORE)
