"""The site policy's signature check before anything is staged (docs/design.md, "Image policy
and signatures"): Prepare with CheckSignature over MemorySignatures. A pin signed by a policy
key is staged with the signature in its plan (schema 4); unsigned, another key's, a replayed
signature and a bad key file are refused with nothing in the workspace."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from cosign_artifacts import (
    Artifacts,
    bundle_signature,
    compact,
    legacy_signature,
    listed_together,
    public_pem,
    sha256,
    simple_signing,
    statement,
)
from slurm_image.adapters.memory import FakeClock, MemoryKeyFile, MemorySignatures
from slurm_image.application.prepare import PlanLifecycle, Prepare
from slurm_image.application.signature_check import CheckSignature
from slurm_image.domain.canonical import canonical_json
from slurm_image.domain.errors import InvalidRequest, PlanInvariantViolation, SignatureRefused
from slurm_image.domain.manifest import OCI_INDEX, OCI_MANIFEST
from slurm_image.domain.plan import load_plan
from slurm_image.domain.request import make_request
from slurm_image.domain.signatures import (
    BUNDLE,
    LEGACY,
    SIGNATURE_REQUESTS_MAX,
    SIGNATURES_MAX,
    bundle_tag,
    legacy_tag,
    load_public_key,
)
from slurm_image.ports.registry import RegistryUnavailable
from slurm_image.ports.signatures import KeyFileError
from slurm_image.wire.errors import EXIT_INVALID, EXIT_UNSIGNED, exit_code_for
from support import make_plan

REGISTRY = "registry.site.example"
REPOSITORY = "team/app"
KEY_PATH = "/etc/slurm-image/keys/site.pub"
SITE_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_KEY = ec.generate_private_key(ec.SECP256R1())
IMAGE = compact({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {}, "layers": []})
PIN = sha256(IMAGE)
OTHER = "sha256:" + "cd" * 32


class Site:
    def __init__(self, harness: Any, profile_for: Any, runtime_files: Any) -> None:
        self.harness = harness
        self.signatures = MemorySignatures()
        self.signatures.registry.host(REGISTRY)
        self.signatures.keys[KEY_PATH] = MemoryKeyFile(public_pem(SITE_KEY), uid=0)
        check = CheckSignature(
            self.signatures, self.signatures.registry, self.signatures.registry.clock
        )
        self.prepare = Prepare(
            FakeClock(), runtime_files, harness.workspace, check_signature=lambda: check
        )
        self.profile_for = profile_for
        self.planner = PlanLifecycle(FakeClock(), runtime_files, check_signature=lambda: check)

    def profile(self, **policy: Any) -> Any:
        table = {"require_signature": True, "keys": [KEY_PATH], **policy}
        return self.profile_for(
            self.harness.root,
            policy=table,
            enroot={"environment": {"ENROOT_ALLOW_HTTP": "y"}},
        )

    def publish(self, artifacts: Artifacts) -> None:
        for reference, (data, media_type) in artifacts.manifests.items():
            self.signatures.registry.put(REGISTRY, REPOSITORY, reference, data, media_type)
        for blob in artifacts.blobs:
            self.signatures.registry.put_blob(REGISTRY, REPOSITORY, blob)

    def stage(self, digest: str = PIN, arch: str | None = None, **policy: Any) -> Any:
        profile, selection = self.profile(**policy)
        request = make_request(
            "import_oci",
            name="app",
            role="client",
            source=f"{REGISTRY}/{REPOSITORY}@{digest}",
            architecture=arch,
        )
        return self.prepare(request, profile, selection)

    def refused(self, digest: str = PIN, arch: str | None = None) -> SignatureRefused:
        with pytest.raises(SignatureRefused) as caught:
            self.stage(digest, arch)
        assert caught.value.field == digest
        assert exit_code_for(caught.value) == EXIT_UNSIGNED
        assert not self.harness.exists(f"{self.harness.root}/images"), self.harness.listing()
        return caught.value


@pytest.fixture
def site(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> Site:
    return Site(workspace_harness, profile_for, runtime_files)


@pytest.mark.parametrize(
    "artifacts", [bundle_signature, legacy_signature], ids=["bundle", "legacy"]
)
def test_a_pin_signed_by_a_policy_key_is_staged_with_the_signature_in_its_plan(
    site: Site, artifacts: Any
) -> None:
    site.publish(artifacts(SITE_KEY, PIN))
    prepared = site.stage()
    fingerprint = load_public_key(public_pem(SITE_KEY), KEY_PATH).fingerprint
    signed_by = prepared.plan.signed_by
    assert signed_by is not None
    assert signed_by.key_fingerprint == fingerprint
    assert signed_by.format == (BUNDLE if artifacts is bundle_signature else LEGACY)
    assert signed_by.signed_digest == PIN
    assert prepared.plan.schema_version == 4
    written = json.loads(site.harness.read(prepared.plan.paths.plan))
    assert written["signed_by"]["key_fingerprint"] == fingerprint
    assert written["profile"]["policy"]["require_signature"] is True
    assert load_plan(prepared.plan.canonical_bytes()) == prepared.plan


def test_an_unsigned_pin_is_refused_before_anything_is_staged(site: Site) -> None:
    refused = site.refused()
    assert "is not signed" in refused.rule
    assert refused.refusal == "signature_missing"  # the rule the history names


def test_a_pin_signed_by_another_key_is_refused(site: Site) -> None:
    site.publish(bundle_signature(OTHER_KEY, PIN))
    refused = site.refused()
    assert "not signed by a policy key" in refused.rule
    assert refused.refusal == "signature_other_key"


def test_a_signature_copied_from_another_digest_is_refused(site: Site) -> None:
    # The policy key's real signature of OTHER, replayed under the pin's tags.
    site.publish(bundle_signature(SITE_KEY, PIN, signed=statement(OTHER)))
    site.publish(legacy_signature(SITE_KEY, PIN, payload=simple_signing(OTHER)))
    refused = site.refused()
    assert refused.rule.count("a replayed signature") == 2
    assert refused.refusal == "signature_replayed"


def test_a_replay_is_named_over_another_key_whichever_comes_first(site: Site) -> None:
    site.publish(legacy_signature(OTHER_KEY, PIN))
    site.publish(bundle_signature(SITE_KEY, PIN, signed=statement(OTHER)))
    assert site.refused().refusal == "signature_replayed"


def test_a_bundle_manifest_answered_for_another_digest_is_refused(site: Site) -> None:
    site.publish(bundle_signature(SITE_KEY, PIN, subject=OTHER))
    refused = site.refused()
    assert "signature of another digest" in refused.rule
    assert refused.refusal == "signature_invalid"


@pytest.mark.parametrize("tag", [bundle_tag(PIN), legacy_tag(PIN)], ids=["index", "sig"])
def test_signature_material_of_400_kb_of_brackets_is_refused_with_exit_10(
    site: Site, tag: str
) -> None:
    site.signatures.registry.put(REGISTRY, REPOSITORY, tag, b"[" * 400_000, OCI_MANIFEST)
    assert "nests deeper than 32 levels" in site.refused().rule


def test_a_junk_referrer_listed_before_the_real_signature_does_not_hide_it(site: Site) -> None:
    # Anyone who may push can add a referrer of another subject, by another key, to the index.
    junk = bundle_signature(OTHER_KEY, PIN, subject=OTHER)
    site.publish(listed_together(PIN, junk, bundle_signature(SITE_KEY, PIN)))
    signed_by = site.stage().plan.signed_by
    assert signed_by is not None and signed_by.format == BUNDLE


def test_the_lookup_stops_after_its_request_bound_and_refuses_what_it_did_not_see(
    site: Site,
) -> None:
    others = [ec.generate_private_key(ec.SECP256R1()) for _ in range(SIGNATURES_MAX)]
    site.publish(listed_together(PIN, *(bundle_signature(key, PIN) for key in others)))
    site.publish(legacy_signature(SITE_KEY, PIN))  # past the bound: never asked for
    asked = counting(site)
    rule = site.refused().rule
    assert f"looked no further after {SIGNATURE_REQUESTS_MAX} requests" in rule
    assert "(24 more)" in rule  # 31 other keys' signatures, then the bound
    assert len(asked) == SIGNATURE_REQUESTS_MAX


def counting(site: Site) -> list[str]:
    """The references the registry is asked for from now on."""
    asked: list[str] = []
    registry = site.signatures.registry
    original = registry.fetch_manifest

    def fetch(request: Any) -> Any:
        asked.append(request.reference)
        return original(request)

    registry.fetch_manifest = fetch  # type: ignore[method-assign]
    return asked


def test_a_slow_registry_holds_the_check_no_longer_than_its_timeout(site: Site) -> None:
    site.publish(bundle_signature(SITE_KEY, PIN))
    registry = site.signatures.registry
    registry.hosts[REGISTRY].answer_s = 25  # the index, its referrer, its bundle: 75 s > 60 s
    started = registry.now
    with pytest.raises(RegistryUnavailable) as caught:
        site.stage()
    assert "did not answer in time (within 10 s" in caught.value.rule
    assert exit_code_for(caught.value) == 3
    assert registry.now - started == 60
    assert not site.harness.exists(f"{site.harness.root}/images")


def test_the_whole_check_shares_one_timeout_across_its_lookups(site: Site) -> None:
    index = index_pin(site, PIN)
    site.publish(legacy_signature(SITE_KEY, PIN))
    registry = site.signatures.registry
    registry.hosts[REGISTRY].answer_s = 25  # the index's two tags (50 s), then the index
    with pytest.raises(RegistryUnavailable) as caught:
        site.stage(index, arch="aarch64")
    assert "did not answer in time (within 10 s" in caught.value.rule
    registry.hosts[REGISTRY].answer_s = 5
    assert site.stage(index, arch="aarch64").plan.signed_by is not None


def index_pin(site: Site, child: str) -> str:
    index = compact(
        {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": child,
                    "size": 1,
                    "platform": {"os": "linux", "architecture": "arm64"},
                }
            ],
        }
    )
    return site.signatures.registry.put(REGISTRY, REPOSITORY, "multi", index, OCI_INDEX)


def test_an_index_pin_is_accepted_on_its_architecture_manifest_signature(site: Site) -> None:
    index = index_pin(site, PIN)
    site.publish(legacy_signature(SITE_KEY, PIN))
    prepared = site.stage(index, arch="aarch64")
    assert prepared.plan.signed_by is not None
    assert prepared.plan.signed_by.signed_digest == PIN
    # Without the architecture asked for, the index's own signature is needed.
    with pytest.raises(SignatureRefused):
        site.stage(index)


def test_an_index_pin_is_refused_when_the_signed_manifest_is_not_the_architecture_s(
    site: Site,
) -> None:
    index = index_pin(site, OTHER)
    site.publish(legacy_signature(SITE_KEY, PIN))
    rule = site.refused(index, arch="aarch64").rule
    assert f"nor its aarch64 manifest {OTHER}" in rule


@pytest.mark.parametrize(
    ("key", "words"),
    [
        (MemoryKeyFile(public_pem(SITE_KEY), mode=0o666), "writable by group or others"),
        (MemoryKeyFile(public_pem(SITE_KEY), uid=4242), "owned by uid 4242"),
        (MemoryKeyFile(b"not a key", uid=0), "no PEM PUBLIC KEY"),
    ],
    ids=["others-write", "foreign", "not-a-key"],
)
def test_a_bad_key_file_is_refused_naming_it(site: Site, key: MemoryKeyFile, words: str) -> None:
    site.publish(bundle_signature(SITE_KEY, PIN))
    site.signatures.keys[KEY_PATH] = key
    with pytest.raises((KeyFileError, ValueError)) as caught:
        site.stage()
    error: Any = caught.value
    assert error.field == KEY_PATH
    assert words in error.rule
    assert exit_code_for(error) == EXIT_INVALID
    assert not site.harness.exists(f"{site.harness.root}/images")


def test_no_signature_is_asked_for_without_require_signature(site: Site) -> None:
    profile, selection = site.profile_for(site.harness.root, policy={"keys": [KEY_PATH]})
    request = make_request(
        "import_oci", name="app", role="client", source=f"{REGISTRY}/{REPOSITORY}@{PIN}"
    )
    planned = site.planner(request, profile, selection)
    assert planned.plan.signed_by is None
    assert planned.plan.schema_version == 2


def test_a_dry_run_plan_records_the_signature_too(site: Site) -> None:
    site.publish(bundle_signature(SITE_KEY, PIN))
    profile, selection = site.profile()
    request = make_request(
        "import_oci", name="app", role="client", source=f"{REGISTRY}/{REPOSITORY}@{PIN}"
    )
    planned = site.planner(request, profile, selection)
    assert planned.plan.signed_by is not None
    assert not site.harness.exists(f"{site.harness.root}/images")


def test_without_a_lookup_a_required_signature_is_refused(site: Site, runtime_files: Any) -> None:
    profile, selection = site.profile()
    request = make_request(
        "import_oci", name="app", role="client", source=f"{REGISTRY}/{REPOSITORY}@{PIN}"
    )
    with pytest.raises(SignatureRefused, match="no signature lookup"):
        PlanLifecycle(FakeClock(), runtime_files)(request, profile, selection)


def test_a_plan_records_a_signature_only_in_schema_4_and_only_for_an_import(site: Site) -> None:
    site.publish(bundle_signature(SITE_KEY, PIN))
    plan = site.stage().plan
    with pytest.raises(PlanInvariantViolation, match="schema version 3 plan records no signature"):
        load_plan(canonical_json({**plan.model_dump(mode="json"), "schema_version": 3}))
    inspect = make_plan("inspect_sqsh", source="/lustre/images/serving.sqsh")
    with pytest.raises(PlanInvariantViolation, match="an inspect has no signature"):
        load_plan(
            canonical_json(
                {
                    **inspect.model_dump(mode="json"),
                    "schema_version": 4,
                    "signed_by": plan.model_dump(mode="json")["signed_by"],
                }
            )
        )


def test_a_stored_signature_satisfies_the_policy_only_by_a_key_still_listed(site: Site) -> None:
    site.publish(bundle_signature(SITE_KEY, PIN))
    signed_by = site.stage().plan.signed_by
    check = CheckSignature(
        site.signatures, site.signatures.registry, site.signatures.registry.clock
    )
    profile, _ = site.profile()
    assert check.satisfies(signed_by, profile)
    assert not check.satisfies(None, profile)
    site.signatures.keys[KEY_PATH] = MemoryKeyFile(public_pem(OTHER_KEY), uid=0)
    assert not check.satisfies(signed_by, profile)
    open_profile, _ = site.profile_for(site.harness.root)
    assert check.satisfies(None, open_profile)


def test_inspect_of_a_local_sqsh_under_require_signature_needs_unsigned_ok(
    site: Site, runtime_files: Any
) -> None:
    profile, selection = site.profile()
    source = "/lustre/images/serving.sqsh"
    request = make_request("inspect_sqsh", name="app", role="serving", source=source)
    with pytest.raises(SignatureRefused) as caught:
        site.planner(request, profile, selection)
    assert caught.value.field == "source"
    assert "a local .sqsh carries no signature" in caught.value.rule
    assert "--unsigned-ok" in caught.value.rule
    assert exit_code_for(caught.value) == EXIT_UNSIGNED
    allowed = make_request(
        "inspect_sqsh", name="app", role="serving", source=source, unsigned_ok=True
    )
    plan = site.planner(allowed, profile, selection).plan
    assert plan.request.unsigned_ok is True and plan.schema_version == 4
    assert load_plan(plan.canonical_bytes()) == plan
    open_profile, open_selection = site.profile_for(site.harness.root)
    assert site.planner(request, open_profile, open_selection).plan.schema_version == 2


def test_unsigned_ok_is_for_inspect_only() -> None:
    with pytest.raises(InvalidRequest, match="unsigned_ok"):
        make_request(
            "import_oci",
            name="app",
            role="client",
            source=f"{REGISTRY}/{REPOSITORY}@{PIN}",
            unsigned_ok=True,
        )


def test_a_signature_manifest_whose_digest_header_names_other_bytes_is_refused(
    site: Site,
) -> None:
    artifacts = bundle_signature(SITE_KEY, PIN)
    index, media_type = artifacts.manifests[f"sha256-{PIN.removeprefix('sha256:')}"]
    site.publish(artifacts)
    site.signatures.registry.put(
        REGISTRY,
        REPOSITORY,
        f"sha256-{PIN.removeprefix('sha256:')}",
        index,
        media_type,
        content_digest=OTHER,
    )
    assert "disagrees with the bytes it sent" in site.refused().rule
