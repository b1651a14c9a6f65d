"""The Python API: typed records, the CLI's errors and exit codes, one container."""

from __future__ import annotations

from pathlib import Path

import pytest

from publish_support import SOURCE
from slurm_image import Lifecycles
from slurm_image.application.errors import UnknownAlias
from slurm_image.domain.errors import InvalidProfile, InvalidRequest, SignatureRefused
from slurm_image.domain.lifecycle_state import LifecycleState
from slurm_image.wire.errors import exit_code_for


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    path = tmp_path / "site.toml"
    path.write_text(
        f'workspace_root = "{root}"\n[image_build]\npartition = "cpu"\ncpus_per_task = 2\n'
        'memory = "4G"\ntime_limit = "1:00:00"\n[submitter]\nkind = "fake"\n'
    )
    return path


def test_from_profile_stages_submits_and_reports_typed_records(profile: Path) -> None:
    lifecycles = Lifecycles.from_profile(str(profile), environ={})
    staged = lifecycles.import_image(SOURCE, name="app", role="client", submit=False)
    assert staged.state == LifecycleState.STAGED and staged.job_id is None
    assert staged.job_directory is not None and Path(staged.job_directory).is_dir()
    submitted = lifecycles.submit(staged.lifecycle_id)
    (status,) = lifecycles.status([staged.lifecycle_id])
    assert (status.job_id, status.state) == (submitted.job_id, "PENDING")
    fresh = lifecycles.import_image(SOURCE, name="other", role="client")
    assert fresh.state == LifecycleState.SUBMITTED and fresh.job_id is not None
    assert lifecycles.list_aliases() == []


def test_errors_are_the_clis_with_the_same_exit_codes(profile: Path, tmp_path: Path) -> None:
    lifecycles = Lifecycles.from_profile(str(profile), environ={})
    with pytest.raises(UnknownAlias) as unknown:
        lifecycles.resolve("nothing")
    assert exit_code_for(unknown.value) == 2
    with pytest.raises(InvalidRequest) as bad:
        lifecycles.import_image(SOURCE, name="t", role="admin")
    assert bad.value.field == "role" and exit_code_for(bad.value) == 2
    with pytest.raises(InvalidProfile) as missing:
        Lifecycles.from_profile(str(tmp_path / "absent.toml"), environ={})
    assert missing.value.field == "profile"


def test_inspect_image_under_require_signature_needs_unsigned_ok(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir(mode=0o755)
    key = tmp_path / "site.pub"
    key.write_text("an inspect reads no key\n")
    path = tmp_path / "site.toml"
    path.write_text(
        f'workspace_root = "{root}"\n[image_build]\npartition = "cpu"\ncpus_per_task = 2\n'
        'memory = "4G"\ntime_limit = "1:00:00"\n[submitter]\nkind = "fake"\n'
        f'[policy]\nrequire_signature = true\nkeys = ["{key}"]\n'
    )
    image = tmp_path / "image.sqsh"
    image.write_bytes(b"hsqs")
    image.chmod(0o644)
    tmp_path.chmod(0o755)
    lifecycles = Lifecycles.from_profile(str(path), environ={})
    with pytest.raises(SignatureRefused) as refused:
        lifecycles.inspect_image(str(image), name="app", role="serving", submit=False)
    assert exit_code_for(refused.value) == 10 and "--unsigned-ok" in refused.value.rule
    staged = lifecycles.inspect_image(
        str(image), name="app", role="serving", submit=False, unsigned_ok=True
    )
    assert staged.state == LifecycleState.STAGED


def test_metrics_counts_the_store_without_asking_the_scheduler(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    path = tmp_path / "site.toml"
    path.write_text(
        f'workspace_root = "{root}"\n[image_build]\npartition = "cpu"\ncpus_per_task = 2\n'
        'memory = "4G"\ntime_limit = "1:00:00"\n[submitter]\nkind = "sbatch"\n'
        f'[submitter.sbatch]\nsbatch = "{tmp_path}/no-such-sbatch"\n'
    )
    lifecycles = Lifecycles.from_profile(str(path), environ={})
    lifecycles.import_image(SOURCE, name="app", role="client", submit=False)
    assert lifecycles.metrics().layer_cache is None  # not created by any job yet
    (root / "images" / "layer-cache").mkdir(mode=0o700)
    metrics = lifecycles.metrics()  # no sbatch client here: nothing of the scheduler is asked
    assert metrics.attempts["staged"] == 1
    assert sum(item.entries for item in metrics.aliases) == 0
    assert metrics.layer_cache is not None
    assert metrics.layer_cache.path == f"{root}/images/layer-cache"


def test_a_registry_that_lies_at_resolve_is_a_refusal_recorded_but_not_at_a_dry_run(
    profile: Path,
) -> None:
    from dependency_injector import providers

    from scripted_registry import LIST_V2, index_bytes, manifest_bytes
    from slurm_image.adapters.memory import MemoryRegistry
    from slurm_image.domain.errors import InvalidRegistryAnswer

    registry = MemoryRegistry()
    registry.host("registry.example.org")
    index = index_bytes([("amd64", manifest_bytes("app", "amd64"))])
    lying = "sha256:" + "0" * 64  # a Docker-Content-Digest of other bytes than it sends
    registry.put("registry.example.org", "team/app", "1", index, LIST_V2, content_digest=lying)
    lifecycles = Lifecycles.from_profile(str(profile), environ={})
    lifecycles.container.registry.override(providers.Object(registry))
    tag = "registry.example.org/team/app:1"
    lifecycles.import_image(SOURCE, name="first", role="client", submit=False)  # a store now
    with pytest.raises(InvalidRegistryAnswer):
        lifecycles.plan("import_oci", tag, name="app", role="client", arch="x86_64", resolve=True)
    assert lifecycles.history().events == ()  # a dry run attempted nothing
    with pytest.raises(InvalidRegistryAnswer) as lied:
        lifecycles.import_image(tag, name="app", role="client", arch="x86_64", resolve=True)
    (refused,) = lifecycles.history().events
    assert (refused.event, refused.rule, refused.exit_code) == (
        "refused",
        "registry_digest_mismatch",
        exit_code_for(lied.value),
    )
    assert (refused.source, refused.alias) == (tag, "app")
    assert refused.reason is not None and "Docker-Content-Digest" in refused.reason
