"""The site profile: every field's rule, the enroot environment allowlist, overrides, catalogs."""

from __future__ import annotations

import copy
import hashlib
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from slurm_image.composition.profile_loader import (
    apply_overrides,
    load_profile,
    profile_path,
    store_root,
)
from slurm_image.domain.by_name import DEFAULT_RELEASE_GRACE
from slurm_image.domain.errors import InvalidProfile
from slurm_image.domain.profile import parse_profile
from support import FULL_PROFILE, PROFILE

# (dotted key, bad value); the error must name the dotted key.
BAD_VALUES: list[tuple[str, Any]] = [
    ("workspace_root", "relative/images"),
    ("workspace_root", "/lustre/site images"),
    ("workspace_root", "/lustre/a:b"),
    ("workspace_root", "/lustre/a,b"),
    ("workspace_root", "/lustre/a\\b"),
    ("workspace_root", "/lustre/x/"),
    ("workspace_root", "/"),
    ("workspace_root", 42),
    ("image_build", "cpu"),
    ("image_build.partition", ""),
    ("image_build.partition", "cpu gpu"),
    ("image_build.partition", "cpu,gpu"),
    ("image_build.partition", "cpu\n#SBATCH --gres=gpu:1"),
    ("image_build.partition", 7),
    ("image_build.account", "re search"),
    ("image_build.account", ""),
    ("image_build.account", 12345),
    ("image_build.qos", "normal;rm"),
    ("image_build.qos", "-high"),
    ("image_build.cpus_per_task", 0),
    ("image_build.cpus_per_task", -4),
    ("image_build.cpus_per_task", 100000),
    ("image_build.cpus_per_task", "4"),
    ("image_build.cpus_per_task", True),
    ("image_build.cpus_per_task", 4.0),
    ("image_build.memory", "16"),
    ("image_build.memory", "16GB"),
    ("image_build.memory", "16g"),
    ("image_build.memory", "0G"),
    ("image_build.memory", "016G"),
    ("image_build.memory", "-1G"),
    ("image_build.memory", "16G\n"),
    ("image_build.memory", 16),
    ("image_build.time_limit", "0:00:00"),
    ("image_build.time_limit", "60"),
    ("image_build.time_limit", "1:00"),
    ("image_build.time_limit", "1:60:00"),
    ("image_build.time_limit", "1:00:60"),
    ("image_build.time_limit", "1:0:00"),
    ("image_build.time_limit", "01:00:00"),
    ("image_build.time_limit", "1-00:00:00"),
    ("image_build.time_limit", 3600),
    ("image_build.local_scratch", "tmp"),
    ("image_build.local_scratch", "/local scratch"),
    ("image_build.local_scratch", "/local:scratch"),
    ("image_build.local_scratch", "/tmp/"),
    ("image_build.local_scratch", "/tmp/../etc"),
    ("image_build.local_scratch", 1),
    ("image_build.job_path", ""),
    ("image_build.job_path", "bin:/usr/bin"),
    ("image_build.job_path", "/usr/bin::/bin"),
    ("image_build.job_path", "/usr/bin:"),
    ("image_build.job_path", ["/usr/bin"]),
    ("image_build.gres", "gpu:1"),
    ("inspection", ["pip"]),
    ("inspection.client_distributions", "pip"),
    ("inspection.client_distributions", ["-pip"]),
    ("inspection.client_distributions", ["pip", "pip"]),
    ("inspection.client_distributions", ["pip install"]),
    ("inspection.client_distributions", [1]),
    ("inspection.server_distributions", ["vllm"]),
    ("enroot", "yes"),
    ("enroot.environment", "ENROOT_SQUASH_OPTIONS=-comp zstd"),
    ("enroot.environment.ENROOT_TRANSFER_RETRIES", True),
    ("enroot.options", {}),
    ("submitter.kind", ""),
    ("submitter.kind", "Rest"),
    ("submitter.kind", "my submitter"),
    ("submitter.kind", 1),
    ("submitter.sbatch.sbatch", "bin/sbatch"),
    ("submitter.sbatch.sbatch", "/usr/bin/../sbatch"),
    ("submitter.sbatch.sbatch", "sbatch --wrap"),
    ("submitter.sbatch.sbatch", ""),
    ("submitter.sbatch.timeout_s", 0),
    ("submitter.sbatch.timeout_s", -1),
    ("submitter.sbatch.timeout_s", 3601),
    ("submitter.sbatch.timeout_s", "30"),
    ("submitter.sbatch.timeout_s", True),
    ("submitter.sbatch.squeue", "squeue"),
    ("submitter.rest.url", "ftp://127.0.0.1:6820"),
    ("submitter.rest.url", "http://host name:6820"),
    ("submitter.rest.url", "unix://relative.sock"),
    ("submitter.rest.url", "127.0.0.1:6820"),
    ("submitter.rest.url", ""),
    ("submitter.rest.user", "Alice"),
    ("submitter.rest.user", "a b"),
    ("submitter.rest.user", "x" * 40),
    ("submitter.rest.token_env", "1TOKEN"),
    ("submitter.rest.token_env", "SLURM-JWT"),
    ("submitter.rest.token_file", 5),
    ("submitter.rest.api_version", "v0.0.37"),
    ("submitter.rest.api_version", "v0.0.39"),
    ("submitter.rest.api_version", "v0.0.46"),
    ("submitter.rest.api_version", "latest"),
    ("submitter.rest.timeout_s", 0),
    ("submitter.rest.token", "secret"),
    ("submitter", "sbatch"),
    ("workspace", "/lustre"),
    ("host_patterns", ["login*"]),
    ("metrics", "site-a"),
    ("metrics.store_name", ""),
    ("metrics.store_name", "a\nb"),
    ("metrics.store_name", "x" * 256),
    ("metrics.store_name", 1),
    ("metrics.textfile", "/var/lib/node_exporter"),
    ("store.release_grace", "soon"),
    ("store.release_grace", "-1d"),
    ("store.release_grace", "36501d"),
    ("store.release_grace", 3600),
    ("store.grace", "1d"),
]


def with_value(dotted: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    data = copy.deepcopy(base if base is not None else PROFILE)
    *parents, last = dotted.split(".")
    table = data
    for key in parents:
        table = table.setdefault(key, {})
    table[last] = value
    return data


@pytest.mark.parametrize(("dotted", "value"), BAD_VALUES, ids=[f"{k}={v!r}" for k, v in BAD_VALUES])
def test_profile_refuses_a_bad_value_naming_the_dotted_key(dotted: str, value: Any) -> None:
    with pytest.raises(InvalidProfile) as caught:
        parse_profile(with_value(dotted, value))
    # A list item's error may add its index: inspection.client_distributions.0
    assert caught.value.field == dotted or caught.value.field.startswith(f"{dotted}.")
    assert caught.value.rule


@pytest.mark.parametrize(
    "dotted",
    [
        "workspace_root",
        "image_build",
        "image_build.partition",
        "image_build.memory",
        "image_build.cpus_per_task",
        "image_build.time_limit",
    ],
)
def test_profile_requires_its_mandatory_keys(dotted: str) -> None:
    data = copy.deepcopy(PROFILE)
    *parents, last = dotted.split(".")
    table = data
    for key in parents:
        table = table[key]
    del table[last]
    with pytest.raises(InvalidProfile) as caught:
        parse_profile(data)
    assert caught.value.field == dotted
    assert caught.value.rule == "is required"


def test_profile_unknown_key_says_so() -> None:
    with pytest.raises(InvalidProfile) as caught:
        parse_profile(with_value("image_build.gpus", 1))
    assert caught.value.rule == "is not a known profile key"


def test_profile_accepts_the_full_format_of_cli_md() -> None:
    profile = parse_profile(copy.deepcopy(FULL_PROFILE))
    assert profile.image_build.account == "research"
    assert profile.image_build.local_scratch == "/local/scratch"
    assert profile.inspection.client_distributions == ("pip", "numpy")
    assert profile.enroot.environment["ENROOT_TRANSFER_RETRIES"] == "5"
    assert profile.submitter.kind == "fake"


def test_profile_defaults_follow_the_design() -> None:
    profile = parse_profile(copy.deepcopy(PROFILE))
    assert (
        profile.image_build.job_path
        == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    )
    assert profile.image_build.local_scratch is None
    assert profile.image_build.account is None and profile.image_build.qos is None
    assert profile.inspection.client_distributions == ("pip",)
    assert profile.enroot.environment == {}
    assert profile.submitter.kind == "sbatch"
    assert profile.metrics is None and profile.store_name == profile.workspace_root


def test_the_store_is_named_as_the_profile_says() -> None:
    named = parse_profile(with_value("metrics.store_name", "site-a"))
    assert named.store_name == "site-a"
    assert parse_profile(with_value("metrics", {})).store_name == named.workspace_root


def test_the_release_grace_is_the_profiles_else_the_default() -> None:
    assert parse_profile(PROFILE).release_grace == DEFAULT_RELEASE_GRACE
    assert parse_profile(with_value("store.release_grace", "12h")).release_grace == timedelta(
        hours=12
    )
    assert parse_profile(with_value("store", {})).release_grace == DEFAULT_RELEASE_GRACE


@pytest.mark.parametrize(
    ("dotted", "value"),
    [
        ("image_build.time_limit", "72:00:00"),
        ("image_build.time_limit", "0:00:01"),
        ("image_build.memory", "512M"),
        ("image_build.memory", "1T"),
        ("image_build.cpus_per_task", 1),
        ("image_build.partition", "cpu_long+"),
        ("submitter.rest.url", "unix:///run/slurmrestd.sock"),
        ("submitter.rest.url", "https://[::1]:6820"),
        ("submitter.rest.api_version", "v0.0.44"),
        ("submitter.rest.api_version", "v0.0.45"),
        ("submitter.sbatch.sbatch", "/opt/slurm/bin/sbatch"),
        ("submitter.sbatch.timeout_s", 5),
        ("inspection.client_distributions", []),
        ("metrics.store_name", "site-a /lustre/images"),
    ],
)
def test_profile_accepts_good_values(dotted: str, value: Any) -> None:
    profile: Any = parse_profile(with_value(dotted, value))
    for key in dotted.split("."):
        profile = getattr(profile, key)
    expected = float(value) if isinstance(value, int) and dotted.endswith("timeout_s") else value
    assert (list(profile) if isinstance(profile, tuple) else profile) == expected


def test_profile_digest_changes_with_any_value() -> None:
    one = parse_profile(copy.deepcopy(PROFILE)).sha256()
    two = parse_profile(with_value("image_build.memory", "17G")).sha256()
    assert one != two and len(one) == 64


# -- [enroot] environment ------------------------------------------------------------------------

RESERVED = [
    "ENROOT_CONFIG_PATH",
    "ENROOT_CACHE_PATH",
    "ENROOT_DATA_PATH",
    "ENROOT_TEMP_PATH",
    "ENROOT_RUNTIME_PATH",
    "ENROOT_MAX_PROCESSORS",
    "ENROOT_LOGIN_SHELL",
    "ENROOT_MOUNT_HOME",
]


@pytest.mark.parametrize("key", RESERVED)
def test_enroot_environment_refuses_the_isolated_settings(key: str) -> None:
    with pytest.raises(InvalidProfile) as caught:
        parse_profile(with_value("enroot.environment", {key: "/x"}))
    assert caught.value.field == "enroot.environment"
    assert key in caught.value.rule and "cannot be overridden" in caught.value.rule


@pytest.mark.parametrize(
    "key",
    [
        "ENROOT_FOO",
        "PATH",
        "LD_PRELOAD",
        "BASH_ENV",
        "NVIDIA_VISIBLE_DEVICES",
        "enroot_squash_options",
    ],
)
def test_enroot_environment_refuses_names_outside_the_allowlist(key: str) -> None:
    with pytest.raises(InvalidProfile) as caught:
        parse_profile(with_value("enroot.environment", {key: "x"}))
    assert caught.value.field == "enroot.environment"
    assert "allowed" in caught.value.rule


@pytest.mark.parametrize("value", ["a\nb", "a\rb", "\x1b[31m", "a\x00b", "a\x7f", "x" * 1025])
def test_enroot_environment_refuses_control_characters_and_long_values(value: str) -> None:
    with pytest.raises(InvalidProfile) as caught:
        parse_profile(with_value("enroot.environment", {"ENROOT_SQUASH_OPTIONS": value}))
    assert caught.value.field == "enroot.environment"


def test_enroot_environment_keeps_shell_characters_for_quoting() -> None:
    value = "-comp zstd '$(id)' `x` \"y\""
    profile = parse_profile(with_value("enroot.environment", {"ENROOT_SQUASH_OPTIONS": value}))
    assert profile.enroot.environment["ENROOT_SQUASH_OPTIONS"] == value


# -- the loader: files, overrides ----------------------------------------------------------------

SIMPLE_TOML = """\
workspace_root = "/lustre/site/images"

[image_build]
partition = "cpu"
cpus_per_task = 4
memory = "16G"
time_limit = "1:00:00"
"""


def write(tmp_path: Path, text: str, name: str = "site.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_loader_reads_a_single_profile_and_records_the_file_digest(tmp_path: Path) -> None:
    path = write(tmp_path, SIMPLE_TOML)
    profile, selection = load_profile(path, cluster=None, environ={}, hostnames=["h"])
    assert profile.image_build.partition == "cpu"
    assert selection.how == "explicit"
    assert selection.catalog_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert selection.profile_sha256 == profile.sha256()


@pytest.mark.parametrize(
    ("text", "word"),
    [("workspace_root = \n", "TOML"), ("\xff", "TOML"), ("a = 1\na = 2\n", "TOML")],
)
def test_loader_refuses_unreadable_toml(tmp_path: Path, text: str, word: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(InvalidProfile) as caught:
        load_profile(path, cluster=None, environ={}, hostnames=["h"])
    assert caught.value.field == "profile" and word in caught.value.rule


def test_loader_refuses_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidProfile) as caught:
        load_profile(tmp_path / "none.toml", cluster=None, environ={}, hostnames=["h"])
    assert caught.value.field == "profile"


def test_loader_refuses_a_directory(tmp_path: Path) -> None:
    with pytest.raises(InvalidProfile) as caught:
        load_profile(tmp_path, cluster=None, environ={}, hostnames=["h"])
    assert caught.value.field == "profile"


def test_loader_refuses_an_oversized_file(tmp_path: Path) -> None:
    path = write(tmp_path, SIMPLE_TOML + "#" * (1 << 20))
    with pytest.raises(InvalidProfile, match="bytes"):
        load_profile(path, cluster=None, environ={}, hostnames=["h"])


def test_loader_names_the_dotted_key_of_a_bad_file_value(tmp_path: Path) -> None:
    path = write(tmp_path, SIMPLE_TOML.replace('memory = "16G"', 'memory = "16 GB"'))
    with pytest.raises(InvalidProfile) as caught:
        load_profile(path, cluster=None, environ={}, hostnames=["h"])
    assert caught.value.field == "image_build.memory"


def test_profile_path_prefers_option_then_environment_then_cwd() -> None:
    assert profile_path("a.toml", {"SLURM_IMAGE_PROFILE": "b.toml"}) == Path("a.toml")
    assert profile_path(None, {"SLURM_IMAGE_PROFILE": "b.toml"}) == Path("b.toml")
    assert profile_path(None, {}) == Path("slurm-image.toml")


@pytest.mark.parametrize(
    ("variable", "text", "read"),
    [
        ("SLURM_IMAGE_WORKSPACE_ROOT", "/gpfs/images", lambda p: p.workspace_root),
        ("SLURM_IMAGE_IMAGE_BUILD__PARTITION", "long", lambda p: p.image_build.partition),
        ("SLURM_IMAGE_IMAGE_BUILD__CPUS_PER_TASK", "8", lambda p: p.image_build.cpus_per_task),
        ("SLURM_IMAGE_IMAGE_BUILD__MEMORY", "64G", lambda p: p.image_build.memory),
        ("SLURM_IMAGE_IMAGE_BUILD__TIME_LIMIT", "10:00:00", lambda p: p.image_build.time_limit),
        ("SLURM_IMAGE_IMAGE_BUILD__TIME_LIMIT", "2:00:00", lambda p: p.image_build.time_limit),
        ("SLURM_IMAGE_IMAGE_BUILD__ACCOUNT", "12345", lambda p: p.image_build.account),
        ("SLURM_IMAGE_IMAGE_BUILD__ACCOUNT", '"quoted"', lambda p: p.image_build.account),
        ("SLURM_IMAGE_IMAGE_BUILD__LOCAL_SCRATCH", "/local", lambda p: p.image_build.local_scratch),
        (
            "SLURM_IMAGE_INSPECTION__CLIENT_DISTRIBUTIONS",
            '["pip", "numpy"]',
            lambda p: p.inspection.client_distributions,
        ),
        ("SLURM_IMAGE_SUBMITTER__KIND", "fake", lambda p: p.submitter.kind),
        (
            "SLURM_IMAGE_SUBMITTER__REST__URL",
            "http://10.0.0.1:6820",
            lambda p: p.submitter.rest.url,
        ),
        ("SLURM_IMAGE_SUBMITTER__REST__TIMEOUT_S", "12.5", lambda p: p.submitter.rest.timeout_s),
        (
            "SLURM_IMAGE_SUBMITTER__REST__API_VERSION",
            "v0.0.40",
            lambda p: p.submitter.rest.api_version,
        ),
        ("SLURM_IMAGE_SUBMITTER__SBATCH__TIMEOUT_S", "60", lambda p: p.submitter.sbatch.timeout_s),
        (
            "SLURM_IMAGE_ENROOT__ENVIRONMENT__ENROOT_SQUASH_OPTIONS",
            "-comp zstd",
            lambda p: p.enroot.environment["ENROOT_SQUASH_OPTIONS"],
        ),
    ],
)
def test_override_sets_one_value_with_its_type(
    tmp_path: Path, variable: str, text: str, read: Any
) -> None:
    path = write(tmp_path, SIMPLE_TOML)
    profile, _ = load_profile(path, cluster=None, environ={variable: text}, hostnames=["h"])
    expected: Any = {
        "8": 8,
        "12.5": 12.5,
        "60": 60.0,
        '["pip", "numpy"]': ("pip", "numpy"),
        '"quoted"': "quoted",
    }.get(text, text)
    assert read(profile) == expected


@pytest.mark.parametrize(
    ("variable", "text", "field"),
    [
        ("SLURM_IMAGE_IMAGE_BUILD__CPUS_PER_TASK", "many", "image_build.cpus_per_task"),
        ("SLURM_IMAGE_IMAGE_BUILD__CPUS_PER_TASK", "0", "image_build.cpus_per_task"),
        ("SLURM_IMAGE_WORKSPACE_ROOT", "/a b", "workspace_root"),
        ("SLURM_IMAGE_WORKSPACE_ROOT", "relative", "workspace_root"),
        ("SLURM_IMAGE_IMAGE_BUILD__GPUS", "1", "image_build.gpus"),
        ("SLURM_IMAGE_NOPE__KEY", "1", "nope"),
        ("SLURM_IMAGE_ENROOT__ENVIRONMENT__ENROOT_DATA_PATH", "/x", "enroot.environment"),
        ("SLURM_IMAGE_IMAGE_BUILD__", "x", "SLURM_IMAGE_IMAGE_BUILD__"),
        ("SLURM_IMAGE_WORKSPACE_ROOT__X", "x", "workspace_root.x"),
    ],
)
def test_override_with_a_bad_value_names_the_field(
    tmp_path: Path, variable: str, text: str, field: str
) -> None:
    path = write(tmp_path, SIMPLE_TOML)
    with pytest.raises(InvalidProfile) as caught:
        load_profile(path, cluster=None, environ={variable: text}, hostnames=["h"])
    assert caught.value.field == field


def test_override_leaves_other_slurm_image_variables_alone(tmp_path: Path) -> None:
    path = write(tmp_path, SIMPLE_TOML)
    environ = {"SLURM_IMAGE_PROFILE": "x.toml", "SLURM_IMAGE_UPDATE_GOLDEN": "1", "HOME": "/root"}
    profile, _ = load_profile(path, cluster=None, environ=environ, hostnames=["h"])
    assert profile == parse_profile(copy.deepcopy(PROFILE))


def test_override_changes_the_recorded_profile_digest_not_the_file_digest(tmp_path: Path) -> None:
    path = write(tmp_path, SIMPLE_TOML)
    plain, plain_selection = load_profile(path, cluster=None, environ={}, hostnames=["h"])
    changed, changed_selection = load_profile(
        path, cluster=None, environ={"SLURM_IMAGE_IMAGE_BUILD__MEMORY": "8G"}, hostnames=["h"]
    )
    assert changed_selection.catalog_sha256 == plain_selection.catalog_sha256
    assert changed_selection.profile_sha256 == changed.sha256() != plain.sha256()


# -- catalogs ------------------------------------------------------------------------------------

CATALOG = """\
default = "alpha"

[clusters.alpha]
host_patterns = ["login*.alpha.example.org"]
workspace_root = "/lustre/alpha/images"
[clusters.alpha.image_build]
partition = "cpu"
cpus_per_task = 4
memory = "16G"
time_limit = "1:00:00"

[clusters.beta]
host_patterns = ["beta-login-*", "beta-gw"]
workspace_root = "/lustre/beta/images"
[clusters.beta.image_build]
partition = "short"
cpus_per_task = 2
memory = "8G"
time_limit = "0:30:00"
"""


def catalog(tmp_path: Path, text: str = CATALOG) -> Path:
    return write(tmp_path, text, "catalog.toml")


@pytest.mark.parametrize(
    ("cluster", "hosts", "how", "chosen", "pattern"),
    [
        ("beta", ["login1.alpha.example.org"], "explicit", "beta", None),
        (
            None,
            ["login1.alpha.example.org", "login1"],
            "hostname",
            "alpha",
            "login*.alpha.example.org",
        ),
        (None, ["beta-login-3.site", "beta-login-3"], "hostname", "beta", "beta-login-*"),
        (None, ["beta-gw"], "hostname", "beta", "beta-gw"),
        (None, ["elsewhere"], "default", "alpha", None),
    ],
)
def test_catalog_selection_precedence(
    tmp_path: Path,
    cluster: str | None,
    hosts: list[str],
    how: str,
    chosen: str,
    pattern: str | None,
) -> None:
    path = catalog(tmp_path)
    profile, selection = load_profile(path, cluster=cluster, environ={}, hostnames=hosts)
    assert (selection.how, selection.cluster, selection.pattern) == (how, chosen, pattern)
    assert profile.workspace_root == f"/lustre/{chosen}/images"
    assert selection.catalog_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert selection.profile_sha256 == profile.sha256()


def test_catalog_host_matching_two_clusters_is_an_error(tmp_path: Path) -> None:
    path = catalog(tmp_path, CATALOG.replace('"beta-gw"', '"login*"'))
    with pytest.raises(InvalidProfile) as caught:
        load_profile(path, cluster=None, environ={}, hostnames=["login1.alpha.example.org"])
    assert "alpha" in caught.value.rule and "beta" in caught.value.rule


def test_catalog_without_match_or_default_names_the_host(tmp_path: Path) -> None:
    path = catalog(tmp_path, CATALOG.replace('default = "alpha"\n', ""))
    with pytest.raises(InvalidProfile) as caught:
        load_profile(path, cluster=None, environ={}, hostnames=["gamma-login1.example"])
    assert caught.value.field == "cluster"
    assert "gamma-login1.example" in caught.value.rule


@pytest.mark.parametrize(
    ("text", "cluster", "field"),
    [
        (CATALOG, "gamma", "cluster"),
        (CATALOG.replace('default = "alpha"', 'default = "gamma"'), None, "default"),
        (
            CATALOG.replace('default = "alpha"', 'default = "alpha"\nworkspace_root = "/x"'),
            None,
            "workspace_root",
        ),
        (
            CATALOG.replace('"login*.alpha.example.org"]', '"login*.alpha.example.org"]\nnope = 1'),
            "alpha",
            "clusters.alpha.nope",
        ),
        (
            CATALOG.replace('partition = "short"', 'partition = "a b"'),
            "beta",
            "clusters.beta.image_build.partition",
        ),
        (
            CATALOG.replace('["beta-login-*", "beta-gw"]', '"beta-*"'),
            None,
            "clusters.beta.host_patterns",
        ),
        (
            CATALOG.replace('["beta-login-*", "beta-gw"]', "[1]"),
            None,
            "clusters.beta.host_patterns",
        ),
        ("[clusters]\nalpha = 3\n", None, "clusters.alpha"),
        ("clusters = 3\n", None, "clusters"),
    ],
)
def test_catalog_errors_name_the_field(
    tmp_path: Path, text: str, cluster: str | None, field: str
) -> None:
    path = catalog(tmp_path, text)
    with pytest.raises(InvalidProfile) as caught:
        load_profile(path, cluster=cluster, environ={}, hostnames=["elsewhere"])
    assert caught.value.field == field


def test_single_profile_refuses_a_cluster_name(tmp_path: Path) -> None:
    path = write(tmp_path, SIMPLE_TOML)
    with pytest.raises(InvalidProfile) as caught:
        load_profile(path, cluster="alpha", environ={}, hostnames=["h"])
    assert caught.value.field == "cluster"


def test_catalog_overrides_apply_to_the_selected_cluster(tmp_path: Path) -> None:
    path = catalog(tmp_path)
    profile, _ = load_profile(
        path,
        cluster="beta",
        environ={"SLURM_IMAGE_IMAGE_BUILD__PARTITION": "long"},
        hostnames=["x"],
    )
    assert profile.image_build.partition == "long"
    assert profile.workspace_root == "/lustre/beta/images"


def test_apply_overrides_refuses_to_descend_into_a_value(tmp_path: Path) -> None:
    with pytest.raises(InvalidProfile) as caught:
        apply_overrides({"image_build": "cpu"}, {"SLURM_IMAGE_IMAGE_BUILD__PARTITION": "x"})
    assert caught.value.field == "image_build.partition"


def test_catalog_host_patterns_string_is_refused_not_matched_per_character(tmp_path: Path) -> None:
    # A bare string once matched every host through its '*' character.
    path = catalog(tmp_path, CATALOG.replace('["login*.alpha.example.org"]', '"login*"'))
    with pytest.raises(InvalidProfile) as caught:
        load_profile(path, cluster=None, environ={}, hostnames=["beta-login-1"])
    assert caught.value.field == "clusters.alpha.host_patterns"


def test_example_site_profile_is_valid() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "site-profile.toml"
    profile, selection = load_profile(example, cluster=None, environ={}, hostnames=["h"])
    assert profile.submitter.kind == "fake"
    assert selection.how == "explicit"


def test_enroot_environment_takes_integers_as_their_text() -> None:
    data = {
        "workspace_root": "/srv/ws",
        "image_build": {
            "partition": "cpu",
            "cpus_per_task": 1,
            "memory": "1G",
            "time_limit": "1:00:00",
        },
        "enroot": {"environment": {"ENROOT_TRANSFER_RETRIES": 3}},
    }
    assert parse_profile(data).enroot.environment == {"ENROOT_TRANSFER_RETRIES": "3"}


@pytest.mark.parametrize("value", [True, 1.5, ["x"]])
def test_enroot_environment_refuses_other_non_text_values(value: object) -> None:
    data = {
        "workspace_root": "/srv/ws",
        "image_build": {
            "partition": "cpu",
            "cpus_per_task": 1,
            "memory": "1G",
            "time_limit": "1:00:00",
        },
        "enroot": {"environment": {"ENROOT_TRANSFER_RETRIES": value}},
    }
    with pytest.raises(InvalidProfile) as refused:
        parse_profile(data)
    assert refused.value.field.startswith("enroot.environment")


def test_a_profile_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "slurm-image.toml"
    os.mkfifo(fifo)
    with pytest.raises(InvalidProfile, match="not a regular file"):
        load_profile(fifo, cluster=None, environ={}, hostnames=["h"])


# -- store_root: the catalog reads' profile (workspace_root only, same selection and rule) ----


@pytest.mark.parametrize(
    ("cluster", "hosts"),
    [
        ("beta", ["login1.alpha.example.org"]),
        (None, ["login1.alpha.example.org", "login1"]),
        (None, ["beta-gw"]),
        (None, ["elsewhere"]),
    ],
)
def test_store_root_is_the_workspace_root_load_profile_selects(
    tmp_path: Path, cluster: str | None, hosts: list[str]
) -> None:
    path = catalog(tmp_path)
    profile, _ = load_profile(path, cluster=cluster, environ={}, hostnames=hosts)
    assert store_root(path, cluster=cluster, environ={}, hostnames=hosts) == profile.workspace_root


def test_store_root_of_a_single_profile_follows_the_override(tmp_path: Path) -> None:
    path = write(tmp_path, SIMPLE_TOML)
    environ = {"SLURM_IMAGE_WORKSPACE_ROOT": "/srv/other"}
    profile, _ = load_profile(path, cluster=None, environ=environ)
    assert store_root(path, cluster=None, environ=environ) == profile.workspace_root == "/srv/other"


@pytest.mark.parametrize(
    ("text", "cluster", "field"),
    [
        (CATALOG, "gamma", "cluster"),
        (CATALOG.replace('"/lustre/beta/images"', '"relative/images"'), "beta", None),
        (CATALOG.replace('"/lustre/beta/images"', '"/lustre/be ta"'), "beta", None),
        (CATALOG.replace('"/lustre/beta/images"', "3"), "beta", None),
        (CATALOG.replace('workspace_root = "/lustre/beta/images"\n', ""), "beta", None),
        ("clusters = 3\n", None, "clusters"),
        ("workspace_root = [\n", None, "profile"),
    ],
)
def test_store_root_refuses_what_load_profile_refuses_naming_the_same_field(
    tmp_path: Path, text: str, cluster: str | None, field: str | None
) -> None:
    path = catalog(tmp_path, text)
    with pytest.raises(InvalidProfile) as full:
        load_profile(path, cluster=cluster, environ={}, hostnames=["elsewhere"])
    with pytest.raises(InvalidProfile) as light:
        store_root(path, cluster=cluster, environ={}, hostnames=["elsewhere"])
    assert light.value.field == full.value.field == (field or "clusters.beta.workspace_root")


def test_store_root_reads_nothing_but_the_workspace_root(tmp_path: Path) -> None:
    """The catalog reads do not depend on the build or submitter settings."""
    path = catalog(tmp_path, CATALOG.replace('partition = "short"', 'partition = "a b"'))
    with pytest.raises(InvalidProfile):
        load_profile(path, cluster="beta", environ={})
    assert store_root(path, cluster="beta", environ={}) == "/lustre/beta/images"
