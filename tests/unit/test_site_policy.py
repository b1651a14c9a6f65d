"""The site policy (docs/design.md, "The site policy"): a root-owned ``policy.toml`` whose
``[policy]`` the profile, another profile and the ``SLURM_IMAGE_POLICY__*`` overrides cannot
weaken. The merge rule (``domain.policy.strictest``); the file read only when root alone can
change it and every directory on its way (``composition.site_policy``, on real files: giving
them to root needs root, which CI runs as); the profile loader applying it; the plan recording
it in schema version 6 and no plan without it changing."""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from slurm_image.composition.profile_loader import load_profile
from slurm_image.composition.site_policy import SITE_POLICY_PATH, read_site_policy
from slurm_image.domain.errors import InvalidProfile, InvalidRequest, PlanInvariantViolation
from slurm_image.domain.plan import derive_plan, load_plan
from slurm_image.domain.policy import Policy, strictest
from slurm_image.domain.profile import ProfileSelection, SitePolicy, parse_profile
from slurm_image.domain.request import make_request
from support import (
    CREATED_AT,
    DIGEST,
    LIFECYCLE_ID,
    PROFILE,
    PYTORCH,
    RUNTIME,
    make_plan,
    unavailable,
)

OTHER_UID = 4242
SITE_KEY = "/etc/slurm-image/keys/site.pub"
USER_KEY = "/home/alice/mine.pub"


def policy(**table: Any) -> Policy:
    return Policy.model_validate(table)


# -- the rule: the strictest of the two ---------------------------------------------------


@pytest.mark.parametrize(
    ("site", "profile", "common"),
    [
        ([], [], []),
        (["nvcr.io"], [], ["nvcr.io"]),
        ([], ["nvcr.io"], ["nvcr.io"]),
        (["nvcr.io"], ["nvcr.io/nvidia"], ["nvcr.io/nvidia"]),  # a profile narrows
        (["nvcr.io/nvidia"], ["nvcr.io"], ["nvcr.io/nvidia"]),  # and never widens
        (["nvcr.io/nvidia", "ghcr.io/site"], ["ghcr.io", "docker.io"], ["ghcr.io/site"]),
        (  # Docker Hub's names are one registry
            ["docker.io/library"],
            ["registry-1.docker.io/library/x"],
            ["registry-1.docker.io/library/x"],
        ),
        (["nvcr.io/nvidia"], ["nvcr.io/nvidiax"], None),  # whole components only
        (["nvcr.io"], ["evil.example"], None),
    ],
)  # fmt: skip
def test_allowed_registries_are_what_both_allow(
    site: list[str], profile: list[str], common: list[str] | None
) -> None:
    site_policy, profile_policy = (
        policy(allowed_registries=site),
        policy(allowed_registries=profile),
    )
    if common is not None:
        assert strictest(site_policy, profile_policy).allowed_registries == tuple(common)
        return
    with pytest.raises(InvalidProfile) as refused:
        strictest(site_policy, profile_policy)
    assert refused.value.field == "policy.allowed_registries"
    assert refused.value.rule.startswith(
        f"allows nothing the site policy allows ({', '.join(site)}): a profile can narrow"
    )


def test_a_signature_is_required_when_either_requires_one_and_the_site_keys_alone_count() -> None:
    site = policy(require_signature=True, keys=[SITE_KEY])
    assert strictest(site, policy(require_signature=False)) == site
    assert strictest(site, policy(keys=[USER_KEY])).keys == (SITE_KEY,)
    assert strictest(site, None) == site
    keys_only = policy(keys=[SITE_KEY])
    required_by_profile = policy(require_signature=True, keys=[USER_KEY])
    merged = strictest(keys_only, required_by_profile)
    assert (merged.require_signature, merged.keys) == (True, (SITE_KEY,))
    assert strictest(policy(), required_by_profile) == required_by_profile


# -- the file: root's alone ------------------------------------------------------------------

POLICY_TOML = (
    '[policy]\nallowed_registries = ["nvcr.io/nvidia", "ghcr.io/site"]\n'
    f'require_signature = true\nkeys = ["{SITE_KEY}"]\n'
)


def site_file(tmp_path: Path, text: str = POLICY_TOML) -> Path:
    """``tmp_path/etc/slurm-image/policy.toml``, root's and closed to others, as a site
    installs it (its directories too)."""
    directory = tmp_path / "etc" / "slurm-image"
    directory.mkdir(parents=True)
    for each in (tmp_path / "etc", directory):
        each.chmod(0o755)
    path = directory / "policy.toml"
    path.write_text(text)
    path.chmod(0o644)
    return path


@pytest.fixture
def as_root() -> None:
    if os.geteuid() != 0:
        unavailable("a site policy is root's: its tests create root's files (CI runs as root)")


def test_the_site_policy_is_read_with_the_sha256_of_its_bytes(
    tmp_path: Path, as_root: None
) -> None:
    path = site_file(tmp_path)
    site = read_site_policy(str(path))
    assert site == SitePolicy(
        path=str(path),
        sha256=hashlib.sha256(POLICY_TOML.encode()).hexdigest(),
        policy=policy(
            allowed_registries=["nvcr.io/nvidia", "ghcr.io/site"],
            require_signature=True,
            keys=[SITE_KEY],
        ),
    )


def test_no_file_and_no_directory_on_its_way_is_no_site_policy(tmp_path: Path) -> None:
    assert read_site_policy(str(tmp_path / "policy.toml")) is None
    assert read_site_policy(str(tmp_path / "etc" / "slurm-image" / "policy.toml")) is None
    assert SITE_POLICY_PATH == "/etc/slurm-image/policy.toml"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("file 0664", "{file} is writable by group or others"),
        ("file 0646", "{file} is writable by group or others"),
        ("file another uid's", "{file} is owned by uid 4242"),
        ("directory 0777", "{directory} is writable by group or others without the sticky bit"),
        ("directory 0775", "{directory} is writable by group or others without the sticky bit"),
        ("directory another uid's", "{directory} is owned by uid 4242"),
        ("parent 0757", "{parent} is writable by group or others without the sticky bit"),
        ("file a symlink", "{file} is a symbolic link"),
        ("directory a symlink", "{directory} is a symbolic link"),
        ("file a directory", "{file} is not a regular file"),
    ],
)
def test_a_site_policy_anyone_but_root_could_change_is_refused_naming_it(
    tmp_path: Path, as_root: None, change: str, words: str
) -> None:
    path = site_file(tmp_path)
    directory, parent = path.parent, path.parent.parent
    if change == "file 0664":
        path.chmod(0o664)
    elif change == "file 0646":
        path.chmod(0o646)
    elif change == "file another uid's":
        os.chown(path, OTHER_UID, OTHER_UID)
    elif change == "directory 0777":
        directory.chmod(0o777)
    elif change == "directory 0775":
        directory.chmod(0o775)
    elif change == "directory another uid's":
        os.chown(directory, OTHER_UID, OTHER_UID)
    elif change == "parent 0757":
        parent.chmod(0o757)
    elif change == "file a symlink":
        real = directory / "real.toml"
        path.rename(real)
        path.symlink_to(real)
    elif change == "directory a symlink":
        real = parent / "real"
        directory.rename(real)
        directory.symlink_to(real)
    elif change == "file a directory":
        path.unlink()
        path.mkdir(mode=0o755)
    with pytest.raises(InvalidProfile) as refused:
        read_site_policy(str(path))
    assert refused.value.field == str(path)
    assert words.format(file=path, directory=directory, parent=parent) in refused.value.rule
    assert refused.value.rule.endswith(
        "the site policy and every directory on its way must be changeable by root alone"
    )


def test_a_sticky_directory_of_roots_on_the_way_is_accepted(tmp_path: Path, as_root: None) -> None:
    """Only root (the owner of the directory and of the entry) may rename or remove root's
    entry of a sticky directory: /tmp itself is on the way to every other test's file."""
    path = site_file(tmp_path)
    path.parent.parent.chmod(0o1777)
    assert read_site_policy(str(path)) is not None


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("[policy\n", "{path}", "is not valid TOML"),
        ('workspace_root = "/x"\n[policy]\n', "{path}: workspace_root", "is not a known"),
        ("[policy]\n[other]\n", "{path}: other", "is not a known profile key"),
        ("", "{path}: policy", "is required"),
        ("policy = 1\n", "{path}: policy", "valid dictionary"),
        ("[policy]\nrequire_signature = true\n", "{path}: policy", "needs at least one key"),
        ('[policy]\nkeys = ["relative.pub"]\n', "{path}: policy.keys.0", "absolute"),
        ("[policy]\nallow = []\n", "{path}: policy.allow", "is not a known profile key"),
    ],
)
def test_a_site_policy_that_is_no_policy_is_refused_naming_the_file_and_key(
    tmp_path: Path, as_root: None, text: str, field: str, words: str
) -> None:
    path = site_file(tmp_path, text)
    with pytest.raises(InvalidProfile) as refused:
        read_site_policy(str(path))
    assert refused.value.field == field.format(path=path)
    assert words in refused.value.rule


# -- the loader: the profile, another profile and the overrides under it ------------------

PROFILE_TOML = """workspace_root = "/lustre/site/images"
[image_build]
partition = "cpu"
cpus_per_task = 4
memory = "16G"
time_limit = "1:00:00"
"""


def test_overrides_and_another_profile_cannot_weaken_the_site_policy(
    tmp_path: Path, as_root: None
) -> None:
    site = site_file(tmp_path)
    mine = tmp_path / "mine.toml"
    mine.write_text(
        PROFILE_TOML + f'[policy]\nallowed_registries = ["ghcr.io"]\nkeys = ["{USER_KEY}"]\n'
    )
    weakening = {
        "SLURM_IMAGE_POLICY__REQUIRE_SIGNATURE": "false",
        "SLURM_IMAGE_POLICY__KEYS": f'["{USER_KEY}"]',
    }
    profile, selection = load_profile(
        mine, cluster=None, environ=weakening, hostnames=["h"], site_policy=str(site)
    )
    assert profile.policy == policy(
        allowed_registries=["ghcr.io/site"], require_signature=True, keys=[SITE_KEY]
    )
    assert selection.site_policy_sha256 == hashlib.sha256(site.read_bytes()).hexdigest()
    assert selection.profile_sha256 == profile.sha256()

    bare = tmp_path / "bare.toml"  # no [policy] of its own: the site's
    bare.write_text(PROFILE_TOML)
    profile, _ = load_profile(
        bare, cluster=None, environ={}, hostnames=["h"], site_policy=str(site)
    )
    assert profile.policy == policy(
        allowed_registries=["nvcr.io/nvidia", "ghcr.io/site"],
        require_signature=True,
        keys=[SITE_KEY],
    )


def test_a_profile_that_allows_none_of_the_sites_registries_is_refused(
    tmp_path: Path, as_root: None
) -> None:
    site = site_file(tmp_path)
    mine = tmp_path / "mine.toml"
    mine.write_text(PROFILE_TOML)
    environ = {"SLURM_IMAGE_POLICY__ALLOWED_REGISTRIES": '["evil.example"]'}
    with pytest.raises(InvalidProfile) as refused:
        load_profile(mine, cluster=None, environ=environ, hostnames=["h"], site_policy=str(site))
    assert refused.value.field == "policy.allowed_registries"
    assert refused.value.rule.endswith(f"(site policy {site})")


def test_without_the_file_the_profile_is_loaded_as_before(tmp_path: Path) -> None:
    mine = tmp_path / "mine.toml"
    mine.write_text(PROFILE_TOML + '[policy]\nallowed_registries = ["ghcr.io"]\n')
    missing = str(tmp_path / "no-site-policy.toml")
    profile, selection = load_profile(
        mine, cluster=None, environ={}, hostnames=["h"], site_policy=missing
    )
    assert profile.policy == policy(allowed_registries=["ghcr.io"])
    assert selection.site_policy_sha256 is None
    assert "site_policy_sha256" not in selection.model_dump()


# -- the plan: version 6 records it, no other plan changes -----------------------------------


def site_plan(site_sha256: str | None) -> Any:
    profile = parse_profile(copy.deepcopy(PROFILE))
    selection = ProfileSelection(
        how="explicit",
        catalog_sha256="3" * 64,
        profile_sha256=profile.sha256(),
        site_policy_sha256=site_sha256,
    )
    return derive_plan(
        make_request("import_oci", name="torch", role="client", source=PYTORCH),
        profile,
        selection,
        lifecycle_id=LIFECYCLE_ID,
        created_at=CREATED_AT,
        runtime=RUNTIME,
    )


def test_a_plan_made_under_a_site_policy_is_version_6_and_records_its_sha256() -> None:
    plan = site_plan("a" * 64)
    assert plan.schema_version == 6
    data = json.loads(plan.canonical_bytes())
    assert data["profile_selection"]["site_policy_sha256"] == "a" * 64
    assert load_plan(plan.canonical_bytes()) == plan
    older = dict(data, schema_version=5)
    with pytest.raises(PlanInvariantViolation) as refused:
        load_plan(json.dumps(older, sort_keys=True, separators=(",", ":")).encode())
    assert refused.value.field == "profile_selection.site_policy_sha256"


def test_a_plan_without_a_site_policy_keeps_its_version_and_bytes() -> None:
    plan = site_plan(None)
    assert plan.schema_version == 2
    assert plan.canonical_bytes() == make_plan().canonical_bytes()
    assert b"site_policy" not in plan.canonical_bytes()


def test_the_site_policys_registries_hold_the_plan(tmp_path: Path, as_root: None) -> None:
    site = site_file(tmp_path)
    mine = tmp_path / "mine.toml"
    mine.write_text(PROFILE_TOML)
    profile, selection = load_profile(
        mine, cluster=None, environ={}, hostnames=["h"], site_policy=str(site)
    )
    elsewhere = f"docker.io/library/ubuntu:24.04@{DIGEST}"
    request = make_request("import_oci", name="ubuntu", role="client", source=elsewhere)
    with pytest.raises(InvalidRequest) as refused:
        derive_plan(
            request,
            profile,
            selection,
            lifecycle_id=LIFECYCLE_ID,
            created_at=CREATED_AT,
            runtime=RUNTIME,
        )
    assert "nvcr.io/nvidia, ghcr.io/site" in refused.value.rule


def test_the_doctor_says_the_site_policy_applied_in_its_profile_line() -> None:
    from slurm_image.composition.doctor import profile_detail

    selection = ProfileSelection(how="explicit", profile_sha256="1" * 64)
    assert "site policy" not in profile_detail("/x.toml", selection)
    under = selection.model_copy(update={"site_policy_sha256": "ab" * 32})
    assert profile_detail("/x.toml", under).endswith(
        "; under the site policy (sha256 abababababab)"
    )
