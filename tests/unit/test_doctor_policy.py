"""``doctor``'s ``policy`` check: the allowed registries, whether a signature is required, and
each key's fingerprint, or what makes its file unusable (docs/design.md, "Image policy and
signatures"). Without a ``[policy]`` table the report is what it always was."""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec
from test_doctor import ROOT, Site

from cosign_artifacts import public_pem
from slurm_image.adapters.memory import MemoryKeyFile, MemorySignatures
from slurm_image.application.doctor import CHECKS, Doctor, DoctorReport
from slurm_image.cli.doctor_command import exit_code
from slurm_image.domain.profile import parse_profile
from slurm_image.domain.signatures import load_public_key
from slurm_image.wire.exit_codes import EXIT_INVALID
from support import profile_data

KEY = ec.generate_private_key(ec.SECP256R1())
GOOD, EXPOSED = "/etc/slurm-image/keys/site.pub", "/etc/slurm-image/keys/exposed.pub"


def run(policy: dict[str, Any] | None, signatures: MemorySignatures) -> DoctorReport:
    site = Site()
    data = profile_data()
    data["workspace_root"] = ROOT
    if policy is not None:
        data["policy"] = policy
    site.profile = parse_profile(data)
    doctor = Doctor(
        workspace=site.workspace,
        submitter=site.submitter,
        filesystems=site.filesystems,
        clock=site.clock,
        sleep=site.node,
        signatures=signatures,
    )
    return doctor(site.profile, "site.toml", timeout_s=60, doctor_id="doctor-0123456789abcdef")


def policy_detail(report: DoctorReport) -> tuple[bool, str]:
    (check,) = [check for check in report.checks if check.name == "policy"]
    return check.ok, check.detail


def test_the_policy_names_registries_and_each_key_s_fingerprint() -> None:
    signatures = MemorySignatures()
    signatures.keys[GOOD] = MemoryKeyFile(public_pem(KEY), uid=0)
    report = run(
        {"allowed_registries": ["nvcr.io"], "require_signature": True, "keys": [GOOD]}, signatures
    )
    ok, detail = policy_detail(report)
    fingerprint = load_public_key(public_pem(KEY), GOOD).fingerprint
    assert ok, detail
    assert detail == (
        f"registries: nvcr.io; signature required; keys: {GOOD}: {fingerprint}"
        " (ecdsa-secp256r1), readable and safe"
    )
    names = [check.name for check in report.checks]
    assert names.index("policy") == names.index("layer_cache") + 1
    assert report.ok


def test_a_key_file_others_can_write_fails_the_check_naming_it() -> None:
    signatures = MemorySignatures()
    signatures.keys[GOOD] = MemoryKeyFile(public_pem(KEY), uid=0)
    signatures.keys[EXPOSED] = MemoryKeyFile(public_pem(KEY), mode=0o666, uid=0)
    report = run({"require_signature": True, "keys": [GOOD, EXPOSED]}, signatures)
    ok, detail = policy_detail(report)
    assert not ok
    assert f"{EXPOSED}: is writable by group or others" in detail
    assert "registries: any" in detail
    assert exit_code(report) == EXIT_INVALID


def test_without_a_policy_table_the_report_has_no_policy_check() -> None:
    report = run(None, MemorySignatures())
    assert [check.name for check in report.checks] == list(CHECKS)
