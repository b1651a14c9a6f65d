"""What the gateway's routes share (``app``, ``page_routes``): the service account's verbs, who
asks, each requester's rate and recent verbs, and the calls under way outside."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from slurm_image.domain.errors import Busy
from slurm_image.domain.limits import Bucket, take
from slurm_image.gateway.outside import OutsideParts
from slurm_image.gateway.peer import ConnectionLimits
from slurm_image.gateway.site import SiteVerbs
from slurm_image.gateway.streams import LongAnswers
from slurm_image.gateway.who import Asker, Who
from slurm_image.wire.errors import describe

if TYPE_CHECKING:
    from slurm_image.domain.errors import SlurmImageError
    from slurm_image.domain.gateway_settings import GatewaySettings
    from slurm_image.domain.requester import Account

VERBS_KEPT = 1024
"""Requesters (account and host) whose verbs the gateway keeps built, the latest used."""
log_name = "slurm_image.gateway"


@dataclass
class Gateway:
    """What the routes share: the service account's verbs, who asks, the request rate, each
    recent requester's verbs, and the calls under way to a registry or the scheduler."""

    lifecycles: SiteVerbs
    who: Who
    buckets: dict[int | str, Bucket] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    clock: Callable[[], float] = time.monotonic
    verbs: OrderedDict[tuple[Account, str], SiteVerbs] = field(default_factory=OrderedDict)
    answers: LongAnswers = field(init=False)
    outside: OutsideParts = field(init=False)
    connections: ConnectionLimits | None = None
    """The connections' limits and counts of the servers serving this gateway (``serve``)."""

    def __post_init__(self) -> None:
        settings = self.settings
        self.answers = LongAnswers(settings.max_streams_per_user, settings.max_streams)
        self.outside = OutsideParts(
            settings.max_registry_calls,
            settings.max_scheduler_calls,
            settings.max_calls_per_registry,
        )

    @property
    def settings(self) -> GatewaySettings:
        return self.lifecycles.profile.gateway_settings

    def admit(self, asker: Asker) -> None:
        """Take one of the requester's tokens (``domain.limits``), or refuse with ``Busy``."""
        self._take(asker.account.uid, asker.account.user)

    def admit_anonymous(self, host: str) -> None:
        """Take a token of the readers with no identity asking from ``host`` (the catalog's
        public pages), or refuse with ``Busy``."""
        self._take(f"anonymous@{host}", f"{host} (no identity)")

    def record_unauthenticated(self, error: SlurmImageError, host: str) -> None:
        """Record a request refused for want of an identity (401) in the store's history, as a
        refusal naming no requester (the event names the gateway's account) and the host it
        came from; at most ``requests_per_minute`` a minute per host, so that a flood of
        anonymous requests cannot flood the history (the rest are in the gateway's log)."""
        key = f"unauthenticated@{host}"
        with self.lock:
            bucket, wait_s = take(
                self.buckets.get(key), self.clock(), self.settings.requests_per_minute
            )
            self.buckets[key] = bucket
        if wait_s is not None:
            logging.getLogger(log_name).warning("unrecorded refusal from %s: %s", host, error)
            return
        self.lifecycles.record_refusal(error, reason=f"{describe(error)} (from {host})")

    def _take(self, key: int | str, who: str) -> None:
        per_minute = self.settings.requests_per_minute
        with self.lock:
            bucket, wait_s = take(self.buckets.get(key), self.clock(), per_minute)
            self.buckets[key] = bucket
        if wait_s is not None:
            raise Busy(
                field="requests_per_minute",
                rule=f"{who} made more than {per_minute} requests in a minute",
                retry_after_s=wait_s,
            )

    def acting_for(self, asker: Asker) -> SiteVerbs:
        """The verbs of ``asker``, built once per account as the user database answers now (so
        a change of its groups builds them anew) and host: building them costs several times
        what a ``show`` does (bench/RESULTS.md, "The gateway")."""
        known = self.built_verbs(asker)
        if known is not None:
            return known
        key = (asker.account, asker.host)
        built = self.lifecycles.acting_for(asker.account.requester, host=asker.host)
        with self.lock:
            self.verbs[key] = built
            while len(self.verbs) > VERBS_KEPT:
                self.verbs.popitem(last=False)
        return built

    def built_verbs(self, asker: Asker) -> SiteVerbs | None:
        """The verbs of ``asker`` if ``acting_for`` has them built (nothing is asked of the
        user database or the store: the event loop may call it)."""
        key = (asker.account, asker.host)
        with self.lock:
            known = self.verbs.get(key)
            if known is not None:
                self.verbs.move_to_end(key)
            return known
