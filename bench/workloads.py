"""The workloads of ``bench/run.py``, built with the product's own code in a temporary directory.

- ``Site``: a workspace, two profiles (the in-memory scheduler, and ``sbatch`` pointing at a
  recording stub that answers at once), published aliases made through the Python API,
  attempts staged with ``--no-submit``'s code path, and a long history;
- ``bench_image``: a tiny real squashfs image (busybox and a stand-in ``python3``) for the job.

Nothing here needs the local Slurm cluster or the registry.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sysconfig
import tempfile
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from slurm_image import Lifecycles
from slurm_image.application.store_records import StoreRecords
from slurm_image.domain.history import HistoryEvent, event_line, month_file
from slurm_image.domain.request import make_request
from slurm_image.domain.store_layout import StoreLayout

SOURCE_DIGEST = "5" * 64
SOURCE = f"registry.example.org/team/app:1@sha256:{SOURCE_DIGEST}"
DISTRIBUTIONS = 150
"""A client image's facts as a real one has them: a pip-installed framework and its deps."""

SBATCH_STUB = """#!/bin/sh
# A recording sbatch: one line per call, the script read from stdin, a job id at once.
printf '%s\\n' "$*" >>"$(dirname "$0")/calls.log"
cat >/dev/null
echo $$
"""


def history_event(i: int, time: datetime) -> HistoryEvent:
    """The ``i``-th event of a busy site's history: mostly publications, one in ten a failed
    job, one in forty a cancellation, one in twenty a ``--replace``."""
    fields: dict[str, Any] = {
        "time": time,
        "user": "alice",
        "uid": 1000,
        "host": "login1",
        "lifecycle_id": f"img-{i:032x}",
        "job_id": str(100000 + i),
        "alias": f"alias{i % 1000:04d}",
        "architecture": "x86_64",
        "operation": "inspect" if i % 7 == 0 else "import",
        "role": "client",
    }
    if i % 10 == 9:
        return HistoryEvent(event="job_failed", exit_code=79, state="FAILED", **fields)
    if i % 40 == 3:
        return HistoryEvent(event="cancelled", state="CANCELLED", **fields)
    kind = "replaced" if i % 20 == 1 else "published"
    return HistoryEvent(
        event=kind,
        source_digest=f"sha256:{SOURCE_DIGEST}",
        artifact=f"{i:064x}",
        previous_artifact=f"{i + 1:064x}" if kind == "replaced" else None,
        publish_latency_seconds=float(60 + (i * 37) % 7200),
        **fields,
    )


def client_facts() -> dict[str, Any]:
    distributions = [{"name": f"dist{i:03d}", "version": f"1.{i}.0"} for i in range(DISTRIBUTIONS)]
    distributions.append({"name": "pip", "version": "23.0.1"})
    return {
        "python": {"implementation": "cpython", "version": "3.11.2", "abi": "cp311"},
        "distributions": distributions,
        "installer": {"name": "pip", "version": "23.0.1", "path": "/usr/bin/pip"},
    }


def inspection(role: str, sqsh: bytes) -> bytes:
    """``inspection.json`` as the inspector writes it for ``sqsh``."""
    facts = client_facts()
    facts["python"]["executable"] = "/usr/bin/python3.11"
    facts["shadowed"] = []
    record = {
        "schema_version": 3,
        "inspector_version": "3.0.0",
        "role": role,
        "sqsh_sha256": hashlib.sha256(sqsh).hexdigest(),
        "machine": "x86_64",
        "facts": facts,
    }
    return json.dumps(record).encode()


def chain_record(pinned: str) -> bytes:
    """``chain.json`` as the import job writes it for a manifest pinned directly."""
    config = "sha256:" + "c" * 64
    return f'{{"config": "{config}", "manifest": "{pinned}", "pinned": "{pinned}"}}\n'.encode()


PROFILE = """workspace_root = "{root}"

[image_build]
partition = "cpu"
cpus_per_task = 1
memory = "1G"
time_limit = "0:10:00"

[submitter]
kind = "{kind}"

[submitter.sbatch]
sbatch = "{sbatch}"
"""


@dataclass
class Site:
    """A workspace with its profiles, under ``base`` (a private temporary directory)."""

    base: Path

    def __post_init__(self) -> None:
        self.base.mkdir(mode=0o700, exist_ok=True)
        self.root = self.base / "ws"
        self.root.mkdir(mode=0o700)
        self.bin = self.base / "bin"
        self.bin.mkdir(mode=0o700)
        sbatch = self.bin / "sbatch"
        sbatch.write_text(SBATCH_STUB)
        sbatch.chmod(0o755)
        self.sbatch_calls = self.bin / "calls.log"
        self.fake_profile = self._profile("fake")
        self.sbatch_profile = self._profile("sbatch")
        self.fake = Lifecycles.from_profile(str(self.fake_profile), environ={})
        self.sbatch = Lifecycles.from_profile(str(self.sbatch_profile), environ={})

    def _profile(self, kind: str) -> Path:
        path = self.base / f"{kind}.toml"
        path.write_text(PROFILE.format(root=self.root, kind=kind, sbatch=self.bin / "sbatch"))
        return path

    def publish_finished(self, name: str, sqsh: bytes) -> str:
        """One import through the API with the in-memory scheduler: staged, submitted, its job
        COMPLETED with the candidate, ``inspection.json``, ``chain.json`` and ``architecture``
        the job writes, then published."""
        request = make_request("import_oci", name=name, role="client", source=SOURCE)
        prepared = self.fake.stage(request)
        submission = self.fake.container.submit()(prepared)
        paths = prepared.plan.paths
        Path(paths.sqsh).write_bytes(sqsh)
        Path(paths.result).write_bytes(inspection("client", sqsh))
        Path(paths.job_dir, "chain.json").write_bytes(chain_record(f"sha256:{SOURCE_DIGEST}"))
        Path(paths.job_dir, "architecture").write_bytes(b"x86_64\n")
        self.fake.container.submitter().finish(submission.job_id, 0)
        lifecycle_id: str = prepared.lifecycle_id
        return lifecycle_id

    def publish(self, lifecycle_id: str) -> None:
        self.fake.publish(lifecycle_id)

    def alias(self, name: str) -> None:
        """Another alias of the stored source: answered from the store, as ``import`` does."""
        outcome = self.fake.import_image(SOURCE, name=name, role="client", arch="x86_64")
        assert outcome.from_store, outcome

    def copies(self, name: str, names: list[str]) -> None:
        """``names`` published as copies of the alias ``name`` (its entries renamed), each
        written by the store's own ``write_alias``: a large catalog built in seconds rather
        than an import each."""
        records = StoreRecords(self.fake.container.store())
        document = records.alias(name)
        assert document is not None, name
        for other in names:
            entries = tuple(entry.model_copy(update={"name": other}) for entry in document.entries)
            records.write_alias(document.model_copy(update={"name": other, "entries": entries}))

    def long_history(self, count: int, months: int = 18) -> None:
        """``count`` more events in the store's history, over the ``months`` before the
        publications above: imports and inspections published, replaced, failed (the verified
        chain refused, exit 79) and cancelled, as the use cases record them. Written one month
        file at a time as the History adapter lays them out, line by line (``event_line``),
        rather than through ``append``, which fsyncs each line under the history's lock."""
        layout = StoreLayout(str(self.root))
        end = datetime.now(UTC) - timedelta(days=1)
        step = timedelta(days=30 * months) / count
        months_lines: dict[str, list[bytes]] = {}
        for i in range(count):
            time = end - step * (count - i)
            months_lines.setdefault(month_file(time), []).append(event_line(history_event(i, time)))
        Path(layout.history).mkdir(mode=0o755, exist_ok=True)
        for name, lines in months_lines.items():
            path = Path(layout.history_file(name))
            later = path.read_bytes() if path.exists() else b""
            path.write_bytes(b"".join(lines) + later)
            path.chmod(0o644)

    def staged(self, count: int, lifecycles: Lifecycles | None = None) -> list[str]:
        """``count`` attempts staged as ``import --no-submit`` stages them (by default through
        the sbatch profile, whose submitter they then name)."""
        api = self.sbatch if lifecycles is None else lifecycles
        ids = []
        for i in range(count):
            source = f"registry.example.org/team/app:{i}@sha256:{'6' * 64}"
            outcome = api.import_image(source, name=f"staged{i}", role="client", submit=False)
            ids.append(outcome.lifecycle_id)
        return ids


# -- the job's image -----------------------------------------------------------------------

FAKE_PYTHON = """#!/bin/sh
# python3 of the bench image: `-c CODE` succeeds at once; the inspector's call writes a record.
for arg in "$@"; do
    [ "$arg" = -c ] && exit 0
    out=$arg
done
echo '{}' >"$out"
"""
ENROOT_RC = """# What `enroot import` writes as /etc/rc: run the command given, else a shell.
if [ $# -gt 0 ]; then exec "$@"; else exec /bin/sh; fi
"""
BUSYBOX_APPLETS = ["sh", "cat", "ls", "echo", "env", "mkdir", "test", "[", "printf", "dd"]


IMAGE_CONTENT_IGNORED = shutil.ignore_patterns("site-packages", "__pycache__")


def bench_image(base: Path) -> Path:
    """A real squashfs: busybox-static as /bin/sh, a stand-in python3, and as the image's
    content a copy of this interpreter's standard library without site-packages (about 100 MiB
    of real files, .py, .so and .a, that compress as an image's do; random bytes would not, and
    would make unpacking a plain copy)."""
    root = base / "image-root"
    (root / "bin").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "tmp").mkdir()
    (root / "usr" / "bin").mkdir(parents=True)
    shutil.copy2("/bin/busybox", root / "bin" / "busybox")
    for applet in BUSYBOX_APPLETS:
        (root / "bin" / applet).symlink_to("busybox")
    (root / "etc" / "environment").write_text("PATH=/usr/bin:/bin\n")
    (root / "etc" / "rc").write_text(ENROOT_RC)
    python = root / "usr" / "bin" / "python3"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    shutil.copytree(stdlib, root / "data", symlinks=True, ignore=IMAGE_CONTENT_IGNORED)
    image = base / "image.sqsh"
    subprocess.run(
        [
            *("mksquashfs", str(root), str(image), "-all-root", "-no-progress", "-quiet"),
            *("-noappend", "-comp", "lzo", "-noD"),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    shutil.rmtree(root)
    return image


# -- the big image -------------------------------------------------------------------------

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "slurm-image" / "bench"
ROOTS = Path(
    os.environ.get("SLURM_IMAGE_ROOTS_CACHE", Path.home() / ".cache" / "slurm-image" / "roots")
)
REGISTRY = os.environ.get("SLURM_IMAGE_TEST_REGISTRY", "localhost:5000")
BENCH_REPOSITORY = "slurm-image-bench/big"
V2S2_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
V2S2_CONFIG = "application/vnd.docker.container.image.v1+json"
V2S2_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
ROOT_EXCLUDE = [
    "./usr/share/doc/*",
    "./usr/share/locale/*",
    "./usr/share/man/*",
    "./usr/share/info/*",
    "./usr/share/zoneinfo/*",
    "./var/lib/apt/lists/*",
    "./var/cache/*",
    "./var/log/*",
    "./.slurm-image-root-complete",
]


@dataclass(frozen=True)
class BigImageSpec:
    """What the big image holds: the Debian root the e2e tests use (so the real inspector
    runs), ``random_mib`` MiB of ``os.urandom`` in ``random_files`` files (incompressible, as
    model weights are), and ``small_files`` text files of about ``small_bytes`` each (cut from
    this interpreter's standard library sources: they compress as code does), all in one bottom
    layer; two images each add a small top layer of their own above it."""

    random_mib: int = 1536
    random_files: int = 6
    small_files: int = 40_000
    small_bytes: int = 8192
    files_per_directory: int = 500
    root: str = str(ROOTS / "bookworm")
    generator: int = 1
    """Raised whenever the generation changes what it makes."""

    def key(self) -> str:
        text = json.dumps(self.__dict__, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def describe(self) -> str:
        return (
            f"Debian bookworm root + {self.random_mib} MiB os.urandom in {self.random_files}"
            f" files + {self.small_files} text files of about {self.small_bytes} bytes"
        )


@dataclass(frozen=True)
class BigLayer:
    name: str
    digest: str
    """sha256 hex of the gzip'd blob"""
    diff_id: str
    """sha256 hex of the tar"""
    size: int
    tar_bytes: int


@dataclass(frozen=True)
class BigImages:
    """The two images in the registry and what they hold."""

    first: str
    second: str
    tar_bytes: int
    """the first image's layers uncompressed (their tar streams)"""
    entries: int
    """entries (files, directories, links) of the first image's layers"""
    compressed_bytes: int
    """the first image's layers as the registry holds them"""


class _HashingWriter:
    """A binary sink that hashes and counts what passes to ``target``."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.sha256 = hashlib.sha256()
        self.count = 0

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.count += len(data)
        return int(self.target.write(data))

    def flush(self) -> None:
        self.target.flush()


def _tar_layer(name: str, tar_argv: list[str], directory: Path) -> BigLayer:
    """``tar -c`` of ``tar_argv``, streamed into a gzip (level 1: the random part does not
    compress at any level) in ``directory``; digests computed in the same pass."""
    blob = directory / f"{name}.tar.gz"
    command = ["tar", "--numeric-owner", "--sort=name", "--owner=0", "--group=0", "-cf", "-"]
    with blob.open("wb") as raw:
        digest = _HashingWriter(raw)
        with subprocess.Popen([*command, *tar_argv], stdout=subprocess.PIPE) as tar:
            assert tar.stdout is not None
            diff = _HashingWriter(
                gzip.GzipFile(fileobj=digest, mode="wb", mtime=0, compresslevel=1)
            )
            shutil.copyfileobj(tar.stdout, diff, 1 << 20)
            diff.target.close()
        if tar.returncode != 0:
            raise SystemExit(f"tar of the {name} layer exited {tar.returncode}")
    return BigLayer(
        name, digest.sha256.hexdigest(), diff.sha256.hexdigest(), digest.count, diff.count
    )


def _text_corpus() -> bytes:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    parts = [path.read_bytes() for path in sorted(stdlib.glob("*.py"))]
    return b"".join(parts)


def _generate_content(spec: BigImageSpec, content: Path) -> None:
    """``opt/bench`` of the bottom layer: the random part and the small files."""
    random_dir = content / "opt" / "bench" / "weights"
    random_dir.mkdir(parents=True)
    per_file = spec.random_mib // spec.random_files
    for index in range(spec.random_files):
        with (random_dir / f"part{index}.bin").open("wb") as handle:
            for _ in range(per_file):
                handle.write(os.urandom(1 << 20))
    corpus = _text_corpus()
    small = content / "opt" / "bench" / "src"
    for index in range(spec.small_files):
        directory = small / f"d{index // spec.files_per_directory:04d}"
        if index % spec.files_per_directory == 0:
            directory.mkdir(parents=True)
        size = spec.small_bytes // 8 + (index * 7919) % (spec.small_bytes * 7 // 4)
        offset = (index * 104_729) % (len(corpus) - size)
        header = f"# bench file {index}\n".encode()
        (directory / f"f{index:05d}.py").write_bytes(header + corpus[offset : offset + size])


def _entries(blob: Path) -> int:
    """Entries (files, directories, links) of a layer, as ``tar -t`` lists them."""
    with subprocess.Popen(["tar", "-tzf", str(blob)], stdout=subprocess.PIPE) as tar:
        assert tar.stdout is not None
        count = sum(1 for _ in tar.stdout)
    if tar.returncode != 0:
        raise SystemExit(f"tar -t of {blob} exited {tar.returncode}")
    return count


def generate_big_layers(spec: BigImageSpec, log: Any) -> Path:
    """The layers of the two images, made once per ``spec`` into the cache
    (``~/.cache/slurm-image/bench/big-KEY``: moved into place whole, so an interrupted
    generation leaves nothing that a later run would take for done)."""
    target = CACHE / f"big-{spec.key()}"
    if (target / "layers.json").is_file():
        return target
    if not Path(spec.root, ".slurm-image-root-complete").is_file():
        raise SystemExit(f"no Debian bookworm root at {spec.root} (scripts/debian-roots bookworm)")
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"big-{spec.key()}.", dir=CACHE))
    try:
        log(f"generating the big image ({spec.describe()}) into {target}")
        content = work / "content"
        _generate_content(spec, content)
        excludes = [f"--exclude={pattern}" for pattern in ROOT_EXCLUDE]
        bottom = _tar_layer(
            "bottom", [*excludes, "-C", spec.root, ".", "-C", str(content), "./opt/bench"], work
        )
        shutil.rmtree(content)
        tops = []
        for number in (1, 2):
            top = work / f"top{number}"
            (top / "opt" / "app").mkdir(parents=True)
            (top / "opt" / "app" / "VERSION").write_text(f"{number}\n")
            (top / "opt" / "app" / "build.bin").write_bytes(os.urandom(256 << 10))
            tops.append(_tar_layer(f"top{number}", ["-C", str(top), "./opt/app"], work))
            shutil.rmtree(top)
        record = {
            "spec": spec.__dict__,
            "layers": [layer.__dict__ for layer in (bottom, *tops)],
            "entries": _entries(work / "bottom.tar.gz") + _entries(work / "top1.tar.gz"),
        }
        (work / "layers.json").write_text(json.dumps(record, indent=2))
        work.rename(target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return target


def _registry_has(reference: str) -> bool:
    name, _, digest = reference.partition("@")
    host, _, path = name.partition("/")
    repository = path.rsplit(":", 1)[0]
    request = urllib.request.Request(
        f"http://{host}/v2/{repository}/manifests/{digest}",
        method="HEAD",
        headers={"Accept": V2S2_MANIFEST},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 (http only)
            return bool(response.status == 200)
    except OSError:
        return False


def _push(directory: Path, layers: list[BigLayer], tag: str, work: Path) -> str:
    """The image of ``layers`` (bottom first) as a Docker v2s2 manifest (registry 2.8 answers
    Enroot's Accept-less probe with 404 for OCI manifests: docs/enroot.md), pushed with
    skopeo from a directory layout of hard links to the cached blobs; its reference."""
    layout = work / f"{tag}.dir"
    layout.mkdir()
    (layout / "version").write_text("Directory Transport Version: 1.1\n")
    for layer in layers:
        os.link(directory / f"{layer.name}.tar.gz", layout / layer.digest)
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "created": "2026-01-01T00:00:00Z",
            "config": {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin"], "Cmd": ["/bin/sh"]},
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{x.diff_id}" for x in layers]},
            "history": [{"created": "2026-01-01T00:00:00Z", "created_by": "bench/workloads.py"}],
        },
        sort_keys=True,
    ).encode()
    config_digest = hashlib.sha256(config).hexdigest()
    (layout / config_digest).write_bytes(config)
    manifest = {
        "schemaVersion": 2,
        "mediaType": V2S2_MANIFEST,
        "config": {
            "mediaType": V2S2_CONFIG,
            "size": len(config),
            "digest": f"sha256:{config_digest}",
        },
        "layers": [
            {"mediaType": V2S2_LAYER, "size": x.size, "digest": f"sha256:{x.digest}"}
            for x in layers
        ],
    }
    (layout / "manifest.json").write_text(json.dumps(manifest, indent=2))
    target = f"docker://{REGISTRY}/{BENCH_REPOSITORY}:{tag}"
    copy = ["skopeo", "copy", "--quiet", "--format", "v2s2", "--dest-tls-verify=false"]
    subprocess.run([*copy, f"dir:{layout}", target], check=True)
    inspected = subprocess.run(
        ["skopeo", "inspect", "--raw", "--tls-verify=false", target],
        check=True,
        capture_output=True,
    ).stdout
    shutil.rmtree(layout)
    return f"{REGISTRY}/{BENCH_REPOSITORY}:{tag}@sha256:{hashlib.sha256(inspected).hexdigest()}"


def big_images(spec: BigImageSpec, log: Any) -> BigImages:
    """The two big images in the local registry: generated once per ``spec``, pushed again
    only when the registry no longer holds them."""
    directory = generate_big_layers(spec, log)
    record = json.loads((directory / "layers.json").read_text())
    layers = [BigLayer(**layer) for layer in record["layers"]]
    pushed_file = directory / f"pushed-{REGISTRY.replace(':', '_')}.json"
    pushed = json.loads(pushed_file.read_text()) if pushed_file.is_file() else {}
    if not all(
        _registry_has(pushed.get(tag, "")) for tag in (f"{spec.key()}-1", f"{spec.key()}-2")
    ):
        log(f"pushing the big images to {REGISTRY}/{BENCH_REPOSITORY}")
        work = Path(tempfile.mkdtemp(prefix="push.", dir=directory))
        try:
            bottom, top1, top2 = layers
            pushed = {
                f"{spec.key()}-1": _push(directory, [bottom, top1], f"{spec.key()}-1", work),
                f"{spec.key()}-2": _push(directory, [bottom, top2], f"{spec.key()}-2", work),
            }
        finally:
            shutil.rmtree(work, ignore_errors=True)
        pushed_file.write_text(json.dumps(pushed, indent=2))
    return BigImages(
        first=pushed[f"{spec.key()}-1"],
        second=pushed[f"{spec.key()}-2"],
        tar_bytes=layers[0].tar_bytes + layers[1].tar_bytes,
        entries=int(record["entries"]),
        compressed_bytes=layers[0].size + layers[1].size,
    )
