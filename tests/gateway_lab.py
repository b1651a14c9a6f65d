"""A gateway in the test process, for the gateway's behavioural tests and the Lifecycles
contract suite: a real store under /tmp, the site's profile, a fake scheduler the test drives,
users in a ``MemoryAccounts`` and credentials from a ``MemoryMunge``, and ``slurm-image serve``'s
own application served by uvicorn on a loopback port (real HTTP, the requester told by a MUNGE
credential as over TCP).

``client(user)`` is the command line's ``RemoteLifecycles`` for that user; ``local(user)`` the
same verbs without HTTP (``Lifecycles.acting_for``); ``run_job(id)`` writes what a successful job
leaves in its attempt (the ``.sqsh``, ``chain.json``, ``inspection.json``, the architecture) and
completes its fake job.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dependency_injector import providers

from publish_support import chain_json, inspection
from slurm_image.adapters.gateway_client.exchange import Gateway as GatewayAddress
from slurm_image.adapters.gateway_client.remote import RemoteLifecycles
from slurm_image.adapters.memory import FakeSubmitter, MemoryAccounts
from slurm_image.adapters.memory.munge import MemoryMunge
from slurm_image.adapters.system_clock import SystemClock
from slurm_image.composition.api import Lifecycles
from slurm_image.domain.plan import load_plan
from slurm_image.domain.requester import Requester
from slurm_image.domain.store_layout import StoreLayout
from slurm_image.gateway.app import create_app
from slurm_image.gateway.serve import Listener, build_servers
from slurm_image.gateway.state import Gateway
from slurm_image.gateway.who import Who

DIGEST = "d" * 64
SOURCE = f"registry.example.org/team/app:1@sha256:{DIGEST}"
SQSH = b"hsqs" + b"\x00" * 60 + b"the image the job built"
PRIVATE_GROUP = "daemon"
"""A group every Debian system has (the store gives a private artifact to it)."""

USERS = {"alice": 21001, "bob": 21002, "carol": 21003, "dave": 21004}
GROUPS = {"physics": (22001, ("alice", "bob")), PRIVATE_GROUP: (1, ("alice",))}


def _service() -> tuple[str, int]:
    uid = os.getuid()
    try:
        return pwd.getpwuid(uid).pw_name, uid
    except KeyError:
        return str(uid), uid


class GatewayLab:
    """A site with a gateway (see the module docstring)."""

    def __init__(
        self, gateway_settings: str = "", *, http: bool = True, arch: str | None = "x86_64"
    ) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="gw-lab-"))
        self.directory.chmod(0o755)
        self.root = self.directory / "ws"
        self.root.mkdir(mode=0o755)
        self.profile = self.directory / "site.toml"
        self.profile.write_text(
            f'workspace_root = "{self.root}"\n'
            '[image_build]\npartition = "cpu"\ncpus_per_task = 1\nmemory = "1G"\n'
            'time_limit = "0:10:00"\n'
            + (f'arch = "{arch}"\n' if arch is not None else "")
            + '[submitter]\nkind = "fake"\n'
            f"[gateway]\n{gateway_settings}\n"
        )
        self.scheduler = FakeSubmitter()
        self.accounts = MemoryAccounts()
        service, service_uid = _service()
        self.service = service
        self.accounts.add_user(service, service_uid, 0)
        self.accounts.add_group(service if service_uid else "root", 0)
        self.users = dict(USERS)
        for name, uid in self.users.items():
            self.accounts.add_user(name, uid, uid)
            self.accounts.add_group(name, uid)
        for group, (gid, members) in GROUPS.items():
            self.accounts.add_group(group, gid, members)
        self.accounts.add_member(PRIVATE_GROUP, service)
        self.munge = MemoryMunge(clock=SystemClock(), decoder=(os.geteuid(), os.getegid()))
        self.lifecycles = Lifecycles.from_profile(str(self.profile))
        container = self.lifecycles.container
        container.submitter.override(providers.Object(self.scheduler))
        container.accounts.override(providers.Object(self.accounts))
        self.lifecycles.open_store()
        self.layout = StoreLayout(str(self.root))
        self.who = Who(self.accounts, self.munge.authenticator(), plain_http_ok=True)
        self.app = create_app(Gateway(lifecycles=self.lifecycles, who=self.who))
        self.url = ""
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        if http:
            self.start()

    # -- the server --------------------------------------------------------------------

    def start(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.start_on(port)

    def start_on(self, port: int) -> None:
        """Serve the application on ``port`` of the loopback and on a unix socket, as
        ``slurm-image serve`` does (its servers, limits and timeouts): a gateway started
        again."""
        self.socket = str(self.directory / "gateway.sock")
        listeners = [
            Listener("http", host="127.0.0.1", port=port),
            Listener("unix", path=self.socket),
        ]
        trusted = self.app.state.gateway.settings.trusted_proxies
        ((self._server, sockets),) = build_servers(self.app, listeners, trusted_proxies=trusted)
        ready = threading.Event()

        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            ready.set()
            await self._server.serve(sockets=sockets)

        self._thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
        self._thread.start()
        ready.wait(20)
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the gateway did not start")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{port}"

    def threads_in_use(self) -> int:
        """The gateway's thread-pool threads busy now (anyio's limiter, in the server's loop)."""

        async def borrowed() -> int:
            from anyio import to_thread

            return int(to_thread.current_default_thread_limiter().borrowed_tokens)

        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(borrowed(), self._loop).result(timeout=30)

    def stop(self) -> None:
        """What SIGTERM does to ``slurm-image serve``: the long answers end, the server drains."""
        if self._server is not None:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self.app.state.gateway.answers.stop)
            self._server.should_exit = True
            assert self._thread is not None
            self._thread.join(timeout=60)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- who asks ----------------------------------------------------------------------

    def uid(self, user: str) -> int:
        return self.users[user] if user in self.users else _service()[1]

    def add_user(self, name: str, uid: int) -> None:
        self.users[name] = uid
        self.accounts.add_user(name, uid, uid)

    def client(self, user: str) -> RemoteLifecycles:
        """The command line of ``user``, asking the gateway."""
        uid = self.uid(user)
        return RemoteLifecycles(
            GatewayAddress(self.url), credential_source=self.munge.source(uid, uid)
        )

    def local(self, user: str | None = None) -> Lifecycles:
        """The same verbs without HTTP: the service account's, or acting for ``user``."""
        if user is None:
            return self.lifecycles
        return self.lifecycles.acting_for(
            Requester(user=user, uid=self.uid(user)), host="localhost"
        )

    def credential(self, user: str) -> str:
        uid = self.uid(user)
        return self.munge.encode(uid, uid)

    # -- the jobs ----------------------------------------------------------------------

    def plan(self, lifecycle_id: str) -> Any:
        path = Path(self.layout.jobs) / lifecycle_id / "plan.json"
        return load_plan(path.read_bytes())

    def job_of(self, lifecycle_id: str) -> str:
        plan = self.plan(lifecycle_id)
        return next(j.job_id for j in self.scheduler.jobs.values() if j.spec.comment == plan.marker)

    def run_job(
        self,
        lifecycle_id: str,
        *,
        exit_code: int = 0,
        sqsh: bytes = SQSH,
        inspection_record: bytes | None = None,
        architecture: str = "x86_64",
    ) -> None:
        """What the job leaves when it succeeds (or only its exit code when it fails):
        ``inspection_record`` is the inspector's record (default: ``publish_support``'s, run
        as ``architecture``, the one the job imported for)."""
        plan = self.plan(lifecycle_id)
        job_dir = Path(plan.paths.job_dir)
        if exit_code == 0:
            (job_dir / "architecture").write_text(f"{architecture}\n")
            Path(plan.paths.sqsh).write_bytes(sqsh)
            assert plan.source_digest is not None
            (job_dir / "chain.json").write_bytes(chain_json(plan.source_digest))
            record = inspection_record or inspection(plan.request.role, sqsh, machine=architecture)
            Path(plan.paths.result).write_bytes(record)
        self.scheduler.finish(self.job_of(lifecycle_id), exit_code)

    def alias_file(self, name: str) -> dict[str, Any]:
        return dict(json.loads(Path(self.layout.alias(name)).read_bytes()))

    def history(self) -> list[dict[str, Any]]:
        directory = Path(self.layout.history)
        lines = []
        for month in sorted(directory.glob("*.jsonl")) if directory.exists() else ():
            lines += [json.loads(line) for line in month.read_text().splitlines() if line]
        return lines


@contextmanager
def gateway_lab(
    gateway_settings: str = "", *, http: bool = True, arch: str | None = "x86_64"
) -> Iterator[GatewayLab]:
    """A lab whose profile names ``arch`` in ``[image_build]`` (None: the default profile, no
    ``arch``: the node's own)."""
    lab = GatewayLab(gateway_settings, http=http, arch=arch)
    try:
        yield lab
    finally:
        lab.close()


def eventually(check: Callable[[], bool], within_s: float = 30.0) -> bool:
    """Whether ``check`` holds within ``within_s`` seconds, asked every tenth of one."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()
