"""A site whose store ``slurm-image serve`` keeps on a local cluster, with real parts only, for
tests/integration/test_gateway_on_slurm.py (docs/testing.md, "The gateway on Slurm").

- ``world_runtime``: the product and its runtime dependencies where every account can run them.
  The test process's interpreter and venv may lie where ordinary accounts cannot go (under a
  0700 ``/root``), so the packages are linked (copied across file systems) into a 0755
  directory under /tmp beside a copy of ``src/`` as ``slurm_image``, and run by the system's
  interpreter of the same version (``/usr/bin/python3.X``) through a ``slurm-image`` launcher.
- ``node_accounts``: the tests' accounts made inside a cluster's node root too (24.11 and
  26.05 run their daemons there, with the root's own user database), so that its slurmctld
  knows the service account a JWT names and its slurmd can run the job as it.
- ``GatewaySite``: a service account's workspace, profile, Enroot stand-in and gateway process
  (``slurm-image serve`` through ``setpriv``, listening on a unix socket and on a loopback port
  with MUNGE), and the real command line of each user asking it.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from accounts import OrdinaryAccount, OrdinaryGroup
from clusters import Cluster, enroot_table
from munge_daemon import MungeDaemons
from support import install_enroot_standin, unavailable

REPO = Path(__file__).resolve().parents[2]
DISTRIBUTION = "slurm-image-lifecycle"
JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
USER_PATH = "/usr/local/bin:/usr/bin:/bin"
HOLD_S = 300
"""How long a held job waits for its release at most (then it goes on by itself)."""
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "LOST"}


# -- the product where every account can run it ------------------------------------------------


@dataclass(frozen=True)
class Runtime:
    directory: Path
    python: str

    @property
    def launcher(self) -> str:
        return str(self.directory / "bin" / "slurm-image")


def _distributions() -> list[importlib.metadata.Distribution]:
    """The product's runtime dependencies, installed here, with theirs (no extras)."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = [DISTRIBUTION]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        found[name] = distribution = importlib.metadata.distribution(name)
        for text in distribution.requires or ():
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return [d for name, d in found.items() if name != DISTRIBUTION]


def _place(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
    target.chmod(0o755 if os.access(source, os.X_OK) else 0o644)


@contextlib.contextmanager
def world_runtime() -> Iterator[Runtime]:
    """The product and its dependencies in a new 0755 directory (see the module docstring),
    removed afterwards."""
    python = f"/usr/bin/python3.{sys.version_info.minor}"
    if sys.version_info.major != 3 or not os.access(python, os.X_OK):
        unavailable(f"no {python}, an interpreter ordinary accounts can run (Debian: python3)")
    directory = Path(tempfile.mkdtemp(prefix="slurm-image-runtime-"))
    try:
        directory.chmod(0o755)
        packages = directory / "site"
        for distribution in _distributions():
            for entry in distribution.files or ():
                if entry.parts[0] == ".." or "__pycache__" in entry.parts:
                    continue
                source = Path(str(distribution.locate_file(entry)))
                if source.is_file():
                    _place(source, packages / entry)
        for source in (REPO / "src").rglob("*"):
            if source.is_file() and "__pycache__" not in source.parts:
                _place(source, packages / "slurm_image" / source.relative_to(REPO / "src"))
        subprocess.run(
            [python, "-m", "compileall", "-q", "-j", "0", str(packages)],
            check=True,
            capture_output=True,
        )
        launcher = directory / "bin" / "slurm-image"
        launcher.parent.mkdir()
        launcher.write_text(
            f"#!/bin/sh\nPYTHONPATH={packages} PYTHONDONTWRITEBYTECODE=1"
            f' exec {python} -s -m slurm_image.composition "$@"\n'
        )
        for path in [directory, *directory.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)
        launcher.chmod(0o755)
        yield Runtime(directory, python)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# -- the accounts inside a node root -----------------------------------------------------------


def _in_root(local: Cluster, commands: Sequence[str]) -> None:
    """Run the shell ``commands`` in order in ``local``'s node root, in one shell (entering the
    root makes a mount namespace each time)."""
    script = "set -e\n" + "\n".join(commands)
    done = subprocess.run(
        [f"{local.bin_dir}/in-root", "/bin/sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise AssertionError(f"in the {local.series} node root:\n{script}\nfailed: {done.stderr}")


def _removals(users: Sequence[OrdinaryAccount], groups: Sequence[OrdinaryGroup]) -> list[str]:
    def gone(kind: str, name: str) -> str:
        tool = "userdel" if kind == "passwd" else "groupdel"
        return f"if getent {kind} {name} >/dev/null; then {tool} {name}; fi"

    return [
        *(gone("passwd", user.name) for user in users),
        *(gone("group", name) for name in [*(u.group for u in users), *(g.name for g in groups)]),
    ]


@contextlib.contextmanager
def node_accounts(
    local: Cluster, users: Sequence[OrdinaryAccount], groups: Sequence[OrdinaryGroup]
) -> Iterator[None]:
    """``users`` (with their own groups) and ``groups`` in ``local``'s node root, with the same
    names, ids and memberships as on this machine; nothing to do where the cluster runs on the
    machine itself (22.05). Removed afterwards; a leftover of a killed run is removed first."""
    if not local.bin_dir:
        yield
        return
    made = [f"groupadd --gid={group.gid} {group.name}" for group in groups]
    for user in users:
        memberships = ",".join(g.name for g in user.groups)
        made += [
            f"groupadd --gid={user.gid} {user.group}",
            shlex.join(
                [
                    "useradd",
                    f"--uid={user.uid}",
                    f"--gid={user.gid}",
                    *(["--groups", memberships] if memberships else []),
                    f"--home-dir={user.home}",
                    "--no-create-home",
                    "--no-user-group",
                    "--shell=/bin/sh",
                    user.name,
                ]
            ),
        ]
    try:
        _in_root(local, [*_removals(users, groups), *made])
        yield
    finally:
        _in_root(local, _removals(users, groups))


# -- the site ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class GatewaySite:
    """A store owned by ``service`` on ``local``, served by its gateway (see the module
    docstring). ``hold``: each import job waits, once its image is imported, until
    ``release()`` (at most ``HOLD_S``); ``reached()`` says whether one got there.
    ``standin_config``: more of the Enroot stand-in's settings (e.g. a registry's CA);
    ``plain_http``: the job may pull over plain HTTP (the local registry), else TLS only."""

    def __init__(
        self,
        base: Path,
        local: Cluster,
        service: OrdinaryAccount,
        runtime: Runtime,
        munge: MungeDaemons,
        *,
        hold: bool = False,
        standin_config: dict[str, Any] | None = None,
        plain_http: bool = True,
    ) -> None:
        self.base, self.local, self.service = base, local, service
        base.mkdir(mode=0o755)
        self.runtime, self.munge = runtime, munge
        self.home = Path(tempfile.mkdtemp(prefix="site-", dir=service.home))
        self.home.chmod(0o755)
        self.workspace = self.home / "ws"
        self.workspace.mkdir(parents=True, mode=0o700)
        self.socket = str(base / "run" / "gateway.sock")
        self.port = free_port()
        self.held = base / "hold"
        self.held.mkdir(mode=0o755)
        config = dict(standin_config or {})
        if hold:
            touched, release = self.held / "reached", self.held / "release"
            wait = (
                f"touch {touched}; n=0; while [ ! -e {release} ] && [ $n -lt {HOLD_S * 4} ];"
                " do sleep 0.25; n=$((n+1)); done"
            )
            config["hooks"] = {"import": wait}
        standin = install_enroot_standin(base / "standin", config or None)
        self.profile = self.home / "site.toml"
        self.profile.write_text(
            f'workspace_root = "{self.workspace}"\n'
            "[image_build]\n"
            'partition = "build"\ncpus_per_task = 1\nmemory = "1G"\ntime_limit = "0:15:00"\n'
            f'job_path = "{standin}:{JOB_PATH}"\n'
            + enroot_table(allow_http=plain_http)
            + self._submitter()
            + "[gateway]\nrequests_per_minute = 100000\n"
        )
        (base / "run").mkdir(mode=0o755)
        self._give(self.home, self.held, base / "run")
        self.gateway: subprocess.Popen[bytes] | None = None
        self._clients: list[subprocess.Popen[str]] = []
        self.gateway_log = base / "gateway.log"

    def _submitter(self) -> str:
        """22.05: sbatch, as the service account (the machine's clients). 24.11 and 26.05, whose
        client wrappers need root: slurmrestd over TCP with the service account's own JWT."""
        if not self.local.bin_dir:
            return self.local.submitter_table("sbatch")
        out = self.local.command(
            "scontrol", "token", f"username={self.service.name}", "lifespan=7200"
        )
        token = self.home / "slurm.jwt"
        token.write_text(out.strip() + "\n")
        token.chmod(0o600)
        return (
            '[submitter]\nkind = "rest"\n[submitter.rest]\n'
            f'url = "{self.local.rest_url}"\nuser = "{self.service.name}"\n'
            f'token_file = "{token}"\napi_version = "auto"\n'
        )

    def _give(self, *paths: Path) -> None:
        for path in paths:
            subprocess.run(
                ["chown", "-R", f"{self.service.uid}:{self.service.gid}", str(path)], check=True
            )

    # -- the gateway -------------------------------------------------------------------

    def start(self) -> None:
        """``slurm-image serve`` as the service account, until it answers on its socket."""
        assert self.gateway is None or self.gateway.poll() is not None
        argv = self.service.setpriv(
            "env",
            f"PATH={USER_PATH}",
            f"SLURM_CONF={self.local.slurm_conf}",
            self.runtime.launcher,
            "--profile",
            str(self.profile),
            "serve",
            "--listen",
            f"unix:{self.socket}",
            "--listen",
            f"http://127.0.0.1:{self.port}",
            "--munge-socket",
            self.munge.good.socket,
            "--replay-file",
            str(Path(self.socket).parent / "accepted-credentials"),
        )
        with self.gateway_log.open("ab") as log:
            self.gateway = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=self.service.home
            )
        deadline = time.monotonic() + 60
        while not self._answers():
            if self.gateway.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"the gateway did not start:\n{self.log()}")
            time.sleep(0.1)

    def _answers(self) -> bool:
        try:
            with httpx.Client(transport=httpx.HTTPTransport(uds=self.socket)) as client:
                return client.get("http://gateway/healthz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def kill(self) -> None:
        """``kill -9`` the gateway (its process is the interpreter: setpriv, env and the
        launcher each exec the next)."""
        assert self.gateway is not None
        os.kill(self.gateway.pid, signal.SIGKILL)
        self.gateway.wait(timeout=30)

    def stop(self) -> None:
        if self.gateway is not None and self.gateway.poll() is None:
            self.gateway.terminate()
            try:
                self.gateway.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.gateway.kill()
                self.gateway.wait()

    def close(self) -> None:
        """Stop the gateway and whatever a test left running as its accounts: the clients
        still waiting and the jobs (released, then cancelled), so that no process of theirs
        outlives the test."""
        self.stop()
        for process in self._clients:
            if process.poll() is None:
                process.kill()
            process.communicate()
        self.release()
        running = [job for job, show in self.jobs().items() if show["JobState"] not in TERMINAL]
        if running:
            self.local.command("scancel", *running)
        deadline = time.monotonic() + 120
        while any(show["JobState"] not in TERMINAL for show in self.jobs().values()):
            assert time.monotonic() < deadline, f"jobs still running: {self.jobs()}"
            time.sleep(0.5)

    def log(self) -> str:
        return self.gateway_log.read_text(errors="replace") if self.gateway_log.exists() else ""

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- the users' command line -------------------------------------------------------

    def argv(self, user: OrdinaryAccount, *args: str, tcp: bool = False) -> list[str]:
        """``slurm-image --gateway URL --json ARGS`` as ``user`` (their groups, a clean
        environment, no profile of their own)."""
        url = self.http_url if tcp else f"unix:{self.socket}"
        return user.setpriv(
            "env",
            f"PATH={USER_PATH}",
            f"SLURM_IMAGE_MUNGE_SOCKET={self.munge.good.socket}",
            self.runtime.launcher,
            "--gateway",
            url,
            "--json",
            *args,
        )

    def cli(
        self, user: OrdinaryAccount, *args: str, tcp: bool = False, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(user, *args, tcp=tcp),
            cwd=user.home,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def json(self, user: OrdinaryAccount, *args: str, tcp: bool = False) -> dict[str, Any]:
        done = self.cli(user, *args, tcp=tcp)
        assert done.returncode == 0, self.failure(done)
        found: dict[str, Any] = json.loads(done.stdout)
        return found

    def background(self, user: OrdinaryAccount, *args: str) -> subprocess.Popen[str]:
        """The command line of ``user``, left running (``close`` ends it if it still runs)."""
        process = subprocess.Popen(
            self.argv(user, *args),
            cwd=user.home,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._clients.append(process)
        return process

    def failure(self, done: subprocess.CompletedProcess[str] | Any) -> str:
        """What a failed command said, the gateway's log and the tail of each job's log."""
        jobs = self.images / ".tmp" / "jobs"
        logs = sorted(jobs.glob("*/slurm-*.err")) if jobs.is_dir() else []
        tails = "".join(f"\n{p}:\n{p.read_text(errors='replace')[-3000:]}" for p in logs)
        return (
            f"exit {done.returncode}\n{done.stdout}\n{done.stderr}\ngateway:\n{self.log()}{tails}"
        )

    # -- what the store and the scheduler hold -----------------------------------------

    def reached(self) -> bool:
        return (self.held / "reached").exists()

    def wait_until_reached(self, timeout_s: float = 300) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.reached():
            assert time.monotonic() < deadline, f"no job reached its hold:\n{self.log()}"
            time.sleep(0.2)

    def release(self) -> None:
        (self.held / "release").touch()

    @property
    def images(self) -> Path:
        return self.workspace / "images"

    def attempts(self) -> set[str]:
        jobs = self.images / ".tmp" / "jobs"
        return {path.name for path in jobs.iterdir()} if jobs.is_dir() else set()

    def open_books(self) -> list[dict[str, Any]]:
        books = self.images / ".tmp" / "orders"
        found = sorted(books.glob("*.json")) if books.is_dir() else []
        return [json.loads(path.read_text()) for path in found]

    def jobs(self) -> dict[str, dict[str, str]]:
        """The cluster's jobs of this store's lifecycles (by the marker in their comment):
        job id -> ``scontrol show job`` of it."""
        attempts = self.attempts()
        if not attempts:
            return {}
        out = self.local.command("squeue", "-h", "-t", "all", "-o", "%i|%k")
        found = {}
        for line in out.splitlines():
            job_id, _, comment = line.partition("|")
            lifecycle = comment.removeprefix("slurm-image:").split(";", 1)[0]
            if comment.startswith("slurm-image:") and lifecycle in attempts:
                found[job_id] = self.local.show_job(job_id)
        return found

    def alias(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = json.loads((self.images / "aliases" / f"{name}.json").read_text())
        return found

    def history(self) -> list[dict[str, Any]]:
        months = sorted((self.images / "history").glob("*.jsonl"))
        return [json.loads(line) for m in months for line in m.read_text().splitlines() if line]
