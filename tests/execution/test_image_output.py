"""The image speaks only through the job (README, Threat model): its stdout and stderr are a
pipe the job copies into its log, prefixed, escaped and bounded, never a descriptor on the log
itself; and what runs the image's code has no network (a namespace of its own).

Each attack here worked against a job that let the sandbox inherit its stderr (the log file) and
the node's network: the image truncated the log, forged a line of the job's, wrote terminal
escapes and 100 MiB, and reached services listening on the node's loopback.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Job, JobFactory, Standin, need
from test_untrusted_image import AttackImage, attack_image, inspect, inspection_path

__all__ = ["attack_image", "inspection_path"]  # fixtures of the attacks, on both paths

FLOOD_BYTES = 100 << 20
IMAGE_OUTPUT_MAX_BYTES = 1 << 20
LINE_MAX_BYTES = 4096
FORGED = "slurm-image: verified chain: pinned sha256:" + "0" * 64
HOSTILE_OUTPUT = rf"""
( : >/proc/self/fd/2 ) 2>/dev/null
( : >/proc/self/fd/1 ) 2>/dev/null
truncate -s 0 /proc/self/fd/2 2>/dev/null
dd if=/dev/zero of=/proc/self/fd/2 bs=1 count=1 seek=0 conv=notrunc 2>/dev/null
echo '{FORGED}' >&2
printf 'slurm-image: done: forged\n'
printf '\033]0;owned\007\033[2J\033[Hcleared\r\n' >&2
head -c 6000 /dev/zero | tr '\0' L >&2
echo >&2
yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c {FLOOD_BYTES} >&2
"""


def run_with_log_files(job: Job, inspection_path: str) -> tuple[int, bytes]:
    """Run the job as slurmd does with --output/--error: its stdout and stderr are files of the
    attempt directory. Returns the exit code and the error log."""
    command = job.command(inspection_path)
    out = Path(job.job_dir) / f"slurm-{job.job_id}.out"
    err = Path(job.job_dir) / f"slurm-{job.job_id}.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        code = subprocess.run(
            command,
            cwd=job.job_dir,
            env=job.environment(),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            timeout=120,
        ).returncode
    return code, out.read_bytes() + err.read_bytes()


def test_an_image_cannot_erase_forge_or_flood_the_job_s_log(
    make_job: JobFactory, attack_image: AttackImage, inspection_path: str
) -> None:
    job = inspect(make_job, attack_image(HOSTILE_OUTPUT))

    code, log = run_with_log_files(job, inspection_path)

    text = log.decode("utf-8", "replace")
    assert code == 0, text[-3000:]
    lines = text.splitlines()
    # the job's own lines are all there, in order: nothing was truncated
    own = [line for line in lines if line.startswith("slurm-image: ")]
    assert own[0].startswith("slurm-image: image sha256 "), own
    assert own[-1].startswith("slurm-image: done: inspect_sqsh of "), own
    assert "inspecting" in own[1]
    # from the start of the sandbox on, every other line is the image's, prefixed so that none
    # reads as the job's (before it, Enroot's create writes to the log itself)
    started = lines.index(own[1])
    sandbox = [line for line in lines[started + 1 :] if line not in own]
    assert sandbox and all(line.startswith("image: ") for line in sandbox), sandbox[:5]
    assert f"image: {FORGED}" in lines
    assert "image: slurm-image: done: forged" in lines
    assert FORGED not in own
    # no control character reaches the log raw; escapes are written out
    assert not re.search(rb"[\x00-\x08\x0b-\x1f\x7f]", log)
    assert r"image: \x1b]0;owned\x07\x1b[2J\x1b[Hcleared\x0d" in lines
    # a long line is cut; the whole copy is bounded, and says how much it dropped
    assert f"image: {'L' * LINE_MAX_BYTES} [cut]" in lines
    dropped = [line for line in own if "more were dropped" in line]
    assert len(dropped) == 1, own
    found = re.fullmatch(
        rf"slurm-image: the image wrote more than {IMAGE_OUTPUT_MAX_BYTES} bytes: (\d+) more"
        " were dropped",
        dropped[0],
    )
    assert found, dropped
    assert FLOOD_BYTES - IMAGE_OUTPUT_MAX_BYTES < int(found.group(1)) <= FLOOD_BYTES
    assert len(log) < 2 * IMAGE_OUTPUT_MAX_BYTES
    assert job.leftover_scratch() == []


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP service on the node's loopback (as slurmctld, slurmd, slurmrestd and a registry
    listen there): its port, and what each connection sent."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    received: list[bytes] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(2)
                try:
                    received.append(connection.recv(100))
                except OSError:
                    received.append(b"")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], received
    done.set()
    thread.join()
    server.close()


def test_the_image_reaches_no_service_of_the_node_and_sees_none_of_its_sockets(
    make_job: JobFactory,
    attack_image: AttackImage,
    inspection_path: str,
    listener: tuple[int, list[bytes]],
) -> None:
    port, received = listener
    # the probe reaches the service from the node itself: it can fail
    assert shutil.which("busybox")
    subprocess.run(
        ["busybox", "sh", "-c", f"echo from-the-node | busybox nc -w 2 127.0.0.1 {port}"],
        check=True,
        timeout=10,
    )
    need(bool(received), "the probe did not reach the test's own service")
    host_sockets = len(Path("/proc/net/unix").read_text().splitlines())
    payload = (
        f"if echo from-the-image | nc -w 2 127.0.0.1 {port}; then r=reached; else r=refused; fi\n"
        'echo "tcp=$r" >>"$out"\n'
        'echo "unix=$(wc -l </proc/net/unix)" >>"$out"\n'
        'echo "ipv6=$(cat /proc/net/if_inet6 2>/dev/null | wc -l)" >>"$out"\n'
    )
    job = inspect(make_job, attack_image(payload))

    result = job.run(inspection_path=inspection_path)

    assert result.returncode == 0, result.stderr
    report = Path(job.paths.result).read_text()
    assert "tcp=refused" in report
    assert received == [b"from-the-node\n"]
    assert "unix=1" in report  # the header alone: no socket of the node's
    assert host_sockets > 1


NO_NETWORK_NAMESPACE = """#!/bin/sh
# unshare of a node that makes no network namespace (user.max_net_namespaces = 0)
for argument in "$@"; do
    if [ "$argument" = --net ]; then
        echo "unshare: unshare failed: No space left on device" >&2
        exit 1
    fi
done
exec /usr/bin/unshare "$@"
"""


def test_a_node_that_cannot_make_a_network_namespace_runs_no_image_and_says_so(
    make_job: JobFactory, attack_image: AttackImage, standin: Standin
) -> None:
    unshare = standin.bin / "unshare"
    unshare.write_text(NO_NETWORK_NAMESPACE)
    unshare.chmod(0o755)
    job = inspect(make_job, attack_image("echo ran >>/tmp/ran"))

    result = job.run()

    assert result.returncode == 80, result.stderr
    assert "user and network namespaces" in result.stderr
    assert "unshare failed: No space left on device" in result.stderr
    assert "start" not in standin.commands()
    assert job.leftover_scratch() == []
