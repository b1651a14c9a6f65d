"""The import job's verifying curl on its own, in front of a fake curl that answers what a test
says: which calls it hands over, which it refuses, and what Enroot gets back from each."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from slurm_image.domain.script import verifying_curl

FAKE_CURL = r"""#!/bin/bash
# answers every call with $FAKE/body, $FAKE/code and $FAKE/status; records its arguments
printf '%s\0' "$@" >"$FAKE/argv"
out=/dev/stdout
while (($#)); do
    case $1 in
    -o) out=$2; shift ;;
    -w) printf '%s' "$(cat "$FAKE/code")" ;;
    esac
    shift
done
cat "$FAKE/body" >"$out"
exit "$(cat "$FAKE/status")"
"""

REGISTRY = "https://registry.example.org/v2/team/app"
OPTS = ["--proto", "=https", "--retry", "0", "--connect-timeout", "30", "--max-time", "0", "-SsL"]
ACCEPT = ["-H", "Accept: application/vnd.docker.distribution.manifest.v2+json"]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


MANIFEST_CONFIG = json.dumps({"config": {"WorkingDir": "/srv"}}).encode()
MANIFEST = json.dumps(
    {"schemaVersion": 2, "config": {"digest": "sha256:" + sha256(MANIFEST_CONFIG)}, "layers": []}
).encode()
PIN = sha256(MANIFEST)


@dataclass
class Answer:
    returncode: int
    stdout: bytes
    output: bytes | None
    verdict: str
    passed: list[str] | None


class Wrapper:
    def __init__(self, tmp_path: Path) -> None:
        self.chain = tmp_path / "chain"
        for name in ("bin", "tmp", "manifests", "named", "configs", "checked"):
            (self.chain / name).mkdir(parents=True, mode=0o700)
        self.program = self.chain / "bin" / "curl"
        self.program.write_text(verifying_curl())
        self.program.chmod(0o500)
        self.fake = tmp_path / "fake"
        self.fake.mkdir()
        self.real = tmp_path / "real-curl"
        self.real.write_text(FAKE_CURL)
        self.real.chmod(0o700)
        self.output = tmp_path / "output"
        self.pin = PIN
        self.arch = "amd64"
        self.answers(MANIFEST)

    def answers(self, body: bytes, code: str = "200", status: int = 0) -> None:
        (self.fake / "body").write_bytes(body)
        (self.fake / "code").write_text(code)
        (self.fake / "status").write_text(str(status))

    def call(self, *args: str) -> Answer:
        (self.fake / "argv").unlink(missing_ok=True)
        self.output.unlink(missing_ok=True)
        self.output.touch()
        done = subprocess.run(
            [str(self.program), *args],
            env={
                "PATH": os.environ["PATH"],
                "LC_ALL": "C",
                "FAKE": str(self.fake),
                "SLURM_IMAGE_CHAIN": str(self.chain),
                "SLURM_IMAGE_CURL": str(self.real),
                "SLURM_IMAGE_PIN": self.pin,
                "SLURM_IMAGE_ARCH": self.arch,
            },
            capture_output=True,
            timeout=30,
        )
        verdict = self.chain / "verdict"
        argv = self.fake / "argv"
        return Answer(
            done.returncode,
            done.stdout,
            self.output.read_bytes(),
            verdict.read_text() if verdict.exists() else "",
            argv.read_text().split("\0")[:-1] if argv.exists() else None,
        )

    def manifest(self, reference: str, *extra: str, fmt: str = "%{http_code}") -> Answer:
        url = f"{REGISTRY}/manifests/{reference}"
        return self.call("-o", str(self.output), "-w", fmt, *OPTS, *ACCEPT, *extra, "--", url)


@pytest.fixture
def wrapper(tmp_path: Path) -> Wrapper:
    return Wrapper(tmp_path)


def test_a_manifest_that_hashes_to_its_digest_is_handed_over_with_its_code(
    wrapper: Wrapper,
) -> None:
    answer = wrapper.manifest(f"sha256:{PIN}")

    assert (answer.returncode, answer.stdout, answer.output) == (0, b"200", MANIFEST)
    assert answer.verdict == ""
    assert (wrapper.chain / "manifests" / PIN).read_bytes() == MANIFEST
    assert (wrapper.chain / "configs" / sha256(MANIFEST_CONFIG)).read_text() == PIN + "\n"


def test_a_manifest_that_does_not_hash_to_its_digest_never_reaches_the_caller(
    wrapper: Wrapper,
) -> None:
    other = b'{"schemaVersion": 2, "config": {"digest": "sha256:' + b"b" * 64 + b'"}}'
    wrapper.answers(other)

    answer = wrapper.manifest(f"sha256:{PIN}")

    assert answer.returncode != 0
    assert answer.output == b""
    assert f"manifest sha256:{PIN} with a manifest of sha256:{sha256(other)}" in answer.verdict
    assert list((wrapper.chain / "configs").iterdir()) == []


@pytest.mark.parametrize("code", ["404", "401", "500"])
def test_an_error_answer_passes_its_code_but_never_its_body(wrapper: Wrapper, code: str) -> None:
    wrapper.answers(b'{"manifests": [{"digest": "sha256:' + b"c" * 64 + b'"}]}', code)

    answer = wrapper.manifest(f"sha256:{PIN}")

    assert (answer.returncode, answer.stdout, answer.output) == (0, code.encode(), b"")
    assert answer.verdict == ""


def test_a_failed_transfer_passes_curls_status_and_no_body(wrapper: Wrapper) -> None:
    wrapper.answers(MANIFEST[:10], "200", 18)

    answer = wrapper.manifest(f"sha256:{PIN}")

    assert (answer.returncode, answer.output, answer.verdict) == (18, b"", "")


def test_a_manifest_asked_for_by_tag_is_refused(wrapper: Wrapper) -> None:
    answer = wrapper.manifest("latest")

    assert answer.returncode != 0
    assert "other than by its sha256 digest" in answer.verdict
    assert answer.passed is None  # the registry was never asked


def test_a_manifest_neither_pinned_nor_named_by_a_verified_index_is_refused(
    wrapper: Wrapper,
) -> None:
    answer = wrapper.manifest("sha256:" + "d" * 64)

    assert answer.returncode != 0
    assert "neither the pinned digest nor named by its index" in answer.verdict
    assert answer.passed is None


def index_naming(*entries: tuple[bytes, str]) -> bytes:
    return json.dumps(
        {
            "manifests": [
                {"digest": f"sha256:{sha256(data)}", "platform": {"architecture": arch}}
                for data, arch in entries
            ]
        }
    ).encode()


def test_a_verified_index_names_the_manifests_that_may_follow(wrapper: Wrapper) -> None:
    index = index_naming((b"child", "amd64"))
    wrapper.answers(index)
    (wrapper.chain / "named" / sha256(index)).write_text("amd64\n")  # a parent index's entry

    first = wrapper.manifest(f"sha256:{sha256(index)}")
    wrapper.answers(b"child")
    second = wrapper.manifest(f"sha256:{sha256(b'child')}")

    assert (first.returncode, second.returncode, second.output) == (0, 0, b"child")


def test_a_verified_index_keeps_the_architectures_it_names_each_manifest_for(
    wrapper: Wrapper,
) -> None:
    index = index_naming((b"arm", "arm64"), (b"both", "amd64"), (b"both", "ppc64le"))
    wrapper.pin = sha256(index)
    wrapper.answers(index)

    answer = wrapper.manifest(f"sha256:{sha256(index)}")

    assert (answer.returncode, answer.output) == (0, index)
    named = wrapper.chain / "named"
    assert (named / sha256(b"arm")).read_text() == "arm64\n"
    assert (named / sha256(b"both")).read_text() == "amd64\nppc64le\n"


@pytest.mark.parametrize("arch", ["arm64", "ppc64le"])
def test_an_index_entry_of_another_architecture_than_the_one_imported_is_refused(
    wrapper: Wrapper, arch: str
) -> None:
    index = index_naming((b"amd", "amd64"), (b"arm", "arm64"))
    wrapper.pin = sha256(index)
    wrapper.arch = arch
    wrapper.answers(index)
    wrapper.manifest(f"sha256:{sha256(index)}")
    wrapper.answers(b"amd")

    answer = wrapper.manifest(f"sha256:{sha256(b'amd')}")

    assert answer.returncode != 0
    assert f"named by its index for amd64, not for {arch}, the architecture imported" in (
        answer.verdict
    )
    assert (answer.output, answer.passed) == (b"", None)  # never asked, nothing handed over


@pytest.mark.parametrize(
    ("extra", "fmt"),
    [(["--data-urlencode", "x=y"], "%{http_code}"), ([], "%{http_code} %{url}"), (["-K"], "")],
)
def test_a_manifest_call_of_a_shape_it_does_not_know_is_refused(
    wrapper: Wrapper, extra: list[str], fmt: str
) -> None:
    answer = wrapper.manifest(f"sha256:{PIN}", *extra, fmt=fmt)

    assert answer.returncode != 0
    assert answer.verdict != ""
    assert answer.output == b""


def test_a_manifest_in_a_call_without_a_closing_url_is_refused(wrapper: Wrapper) -> None:
    url = f"{REGISTRY}/manifests/sha256:{PIN}"

    answer = wrapper.call("-o", str(wrapper.output), "-w", "%{http_code}", *OPTS, url)

    assert answer.returncode != 0
    assert "without a closing -- URL" in answer.verdict
    assert answer.passed is None  # the registry was never asked
    assert answer.output == b""


def test_the_permission_probe_and_other_urls_are_curls_own(wrapper: Wrapper) -> None:
    probe = ["-o", str(wrapper.output), "-w", "%{http_code}", *OPTS, "-I", "--"]
    probe.append(f"{REGISTRY}/manifests/sha256:{PIN}")
    layer = [*OPTS, "-f", "--", f"{REGISTRY}/blobs/sha256:" + "e" * 64]

    assert wrapper.call(*probe).passed == probe
    assert wrapper.call(*layer).passed == layer
    assert (wrapper.chain / "verdict").exists() is False


def test_the_config_is_checked_and_handed_over_once_its_manifest_was_verified(
    wrapper: Wrapper,
) -> None:
    wrapper.manifest(f"sha256:{PIN}")
    wrapper.answers(MANIFEST_CONFIG)
    url = f"{REGISTRY}/blobs/sha256:{sha256(MANIFEST_CONFIG)}"

    answer = wrapper.call(*OPTS, "-f", "--", url)

    assert (answer.returncode, answer.stdout, answer.verdict) == (0, MANIFEST_CONFIG, "")
    assert (wrapper.chain / "checked" / sha256(MANIFEST_CONFIG)).read_text() == "\n"


@pytest.mark.parametrize(
    ("config", "kept"),
    [
        ({"architecture": "arm64"}, "arm64"),
        ({"Architecture": "ppc64le"}, "ppc64le"),
        ({"architecture": "amd64", "Architecture": "arm64"}, "amd64"),
        ({"architecture": {"not": "a name"}}, "{"),
        ({"architecture": "a" * 300}, "a" * 100),
    ],
    ids=["architecture", "Architecture", "both", "object", "long"],
)
def test_the_config_architecture_is_kept_as_enroot_reads_it(
    tmp_path: Path, config: dict[str, object], kept: str
) -> None:
    wrapper = Wrapper(tmp_path)
    blob = json.dumps({**config, "config": {}}).encode()
    manifest = json.dumps({"config": {"digest": f"sha256:{sha256(blob)}"}, "layers": []}).encode()
    wrapper.pin = sha256(manifest)
    wrapper.answers(manifest)
    wrapper.manifest(f"sha256:{sha256(manifest)}")
    wrapper.answers(blob)

    answer = wrapper.call(*OPTS, "-f", "--", f"{REGISTRY}/blobs/sha256:{sha256(blob)}")

    assert (answer.returncode, answer.stdout, answer.verdict) == (0, blob, "")
    assert (wrapper.chain / "checked" / sha256(blob)).read_text() == kept + "\n"


def test_a_config_that_does_not_hash_to_the_manifests_digest_is_refused(
    wrapper: Wrapper,
) -> None:
    wrapper.manifest(f"sha256:{PIN}")
    wrapper.answers(b'{"config": {}}')
    url = f"{REGISTRY}/blobs/sha256:{sha256(MANIFEST_CONFIG)}"

    answer = wrapper.call(*OPTS, "-f", "--", url)

    assert (answer.returncode != 0, answer.stdout) == (True, b"")
    assert "answered the image config" in answer.verdict
