"""The rendered batch script: golden files byte for byte, bash -n, and what it must (not) ask.

Regenerate the golden files after an intended renderer change with
``SLURM_IMAGE_UPDATE_GOLDEN=1 scripts/test tests/unit/test_script_golden.py`` and review the diff.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, reject
from hypothesis import strategies as st

from slurm_image.domain import job_steps, paths
from slurm_image.domain.doctor_script import DOCTOR_STEPS
from slurm_image.domain.errors import DomainError
from slurm_image.domain.plan import Plan
from slurm_image.domain.script import (
    CHECK_STEPS,
    EXIT_CODES,
    IMAGE_STEPS_AFTER_STAGE,
    IMAGE_STEPS_BEFORE_STAGE,
    IMPORT_STEPS_AFTER_CURL,
    IMPORT_STEPS_BEFORE_CURL,
    STAGE_STEPS,
    STREAM_IMPORT_STEPS_BEFORE_CURL,
    VERIFYING_CURL_MARKER,
    VERIFYING_CURL_STEPS,
    render_script,
    verifying_curl,
)
from support import DIGEST, FULL_PROFILE, PROFILE, PYTORCH_URI, SQSH, make_plan

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
STREAM_PROFILE = {**PROFILE, "image_build": {**PROFILE["image_build"], "importer": "stream"}}
UPDATE = os.environ.get("SLURM_IMAGE_UPDATE_GOLDEN") == "1"

CASES: dict[str, dict[str, Any]] = {
    "import_client.sbatch": {},
    "inspect_serving.sbatch": {"operation": "inspect_sqsh", "source": SQSH, "role": "serving"},
    "import_client_site_options.sbatch": {"profile": FULL_PROFILE, "architecture": "aarch64"},
    "import_client_stream.sbatch": {"profile": STREAM_PROFILE},
}


def bash_syntax_ok(script: str) -> None:
    done = subprocess.run(
        ["bash", "-n"], input=script.encode(), capture_output=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr.decode()


def directives(script: str) -> list[str]:
    """The #SBATCH lines sbatch reads: those before the first line that is not a comment."""
    lines = []
    for line in script.splitlines()[1:]:
        if line.strip() and not line.startswith("#"):
            break
        if line.startswith("#SBATCH"):
            lines.append(line)
    return lines


@pytest.mark.parametrize("golden", sorted(CASES))
def test_rendered_script_matches_its_golden_file(golden: str) -> None:
    script = render_script(make_plan(**CASES[golden]))
    path = GOLDEN / golden
    if UPDATE:
        path.write_text(script, encoding="utf-8")
    assert path.exists(), f"missing {path}: run with SLURM_IMAGE_UPDATE_GOLDEN=1 to create it"
    assert script.encode("utf-8") == path.read_bytes()


@pytest.mark.parametrize("golden", sorted(CASES))
def test_golden_script_passes_bash_n(golden: str) -> None:
    bash_syntax_ok((GOLDEN / golden).read_text(encoding="utf-8"))


@pytest.mark.parametrize("golden", sorted(CASES))
def test_rendering_is_deterministic(golden: str) -> None:
    assert render_script(make_plan(**CASES[golden])) == render_script(make_plan(**CASES[golden]))


def test_import_script_asks_for_the_profile_resources_and_no_gpu() -> None:
    plan = make_plan()
    script = render_script(plan)
    lines = directives(script)
    for expected in [
        "#SBATCH --partition=cpu",
        "#SBATCH --cpus-per-task=4",
        "#SBATCH --mem=16G",
        "#SBATCH --time=1:00:00",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        "#SBATCH --no-requeue",
        "#SBATCH --job-name=slurm-image-client",
        f"#SBATCH --chdir={plan.paths.job_dir}",
        f"#SBATCH --output={plan.paths.job_dir}/slurm-%j.out",
        f"#SBATCH --error={plan.paths.job_dir}/slurm-%j.err",
        f"#SBATCH --comment=slurm-image:{plan.lifecycle_id}",
    ]:
        assert expected in lines
    assert not any("--account" in line or "--qos" in line for line in lines)
    assert not re.search(r"--gres|--gpus|--gpu|gpu", "\n".join(lines), re.IGNORECASE)
    assert f"readonly SOURCE_URI='{PYTORCH_URI}'" in script
    assert f"readonly SOURCE_URI_TAG_DIGEST='docker://nvcr.io#nvidia/pytorch:{DIGEST}'" in script
    assert re.search(
        r'^ +exec enroot import -a "\$architecture" -o "\$PARTIAL" "\$source_uri"\n'
        r' +\) 2>&1 >&3 3>&- \| progress_enroot "\$log"$',
        script,
        re.MULTILINE,
    )
    assert f"# plan sha256: {plan.sha256()}" in script


def test_site_options_reach_directives_and_environment() -> None:
    script = render_script(make_plan(profile=FULL_PROFILE))
    lines = directives(script)
    assert "#SBATCH --account=research" in lines
    assert "#SBATCH --qos=normal" in lines
    assert "readonly LOCAL_SCRATCH=/local/scratch" in script
    assert "readonly JOB_PATH=/opt/enroot/bin:/usr/local/bin:/usr/bin:/bin" in script
    assert "export ENROOT_SQUASH_OPTIONS='-comp zstd -Xcompression-level 3'" in script
    assert "export ENROOT_TRANSFER_RETRIES=5" in script
    assert "readonly REQUIRE=pip,numpy" in script


def test_the_verifying_curl_is_in_the_import_script_only() -> None:
    program = verifying_curl()
    assert f"<<'{VERIFYING_CURL_MARKER}'\n{program}{VERIFYING_CURL_MARKER}\n" in render_script(
        make_plan()
    )
    assert f"\n{VERIFYING_CURL_MARKER}\n" not in program  # the here-document ends at its end
    inspect = render_script(make_plan("inspect_sqsh", source=SQSH, role="serving"))
    for text in (
        VERIFYING_CURL_MARKER,
        "SLURM_IMAGE_PIN",
        "check_chain",
        "CHAIN_RECORD",
        "/chain.json",
    ):
        assert text not in inspect


def test_inspect_script_has_no_enroot_import() -> None:
    script = render_script(make_plan("inspect_sqsh", source=SQSH, role="serving"))
    assert "enroot import" not in script
    assert f"readonly SQSH={SQSH}" in script
    assert "readonly REQUIRE=''" in script
    assert "#SBATCH --job-name=slurm-image-serving" in directives(script)


def test_script_isolates_the_job_environment() -> None:
    script = render_script(make_plan())
    assert script.startswith("#!/bin/bash -p\n")
    for needed in [
        "exec /usr/bin/env -i PATH=",
        "set -Eeuo pipefail",
        "umask 077",
        "export NVIDIA_VISIBLE_DEVICES=void",
        "export MELLANOX_VISIBLE_DEVICES=void",
        "export ENROOT_LOGIN_SHELL=no",
        "export ENROOT_MOUNT_HOME=no",
        "export ENROOT_MAX_PROCESSORS=",
        "SLURM_RESTART_COUNT",
        "enroot create -f --name",
        'enroot start --root "${start_arguments[@]}"',
    ]:
        assert needed in script


@pytest.mark.parametrize("code", sorted(EXIT_CODES))
def test_every_documented_job_exit_code_is_used_by_the_script(code: int) -> None:
    scripts = [render_script(make_plan()), render_script(make_plan(profile=STREAM_PROFILE))]
    assert any(f"die {code} " in script for script in scripts)


def test_only_the_stream_importer_carries_the_streamer() -> None:
    by_enroot = render_script(make_plan())
    streaming = render_script(make_plan(profile=STREAM_PROFILE))
    assert "enroot import" in by_enroot and "write_streamer" not in by_enroot
    assert "exec enroot import" not in streaming
    assert "tar2sqfs -q -f" in streaming and "\ndef merge(" in streaming
    # an inspect job imports nothing, whatever the importer
    inspect = make_plan("inspect_sqsh", source=SQSH, role="serving", profile=STREAM_PROFILE)
    assert "write_streamer" not in render_script(inspect)


def _header(script: str) -> str:
    """The comments before the first command (step 0's ``IFS=``)."""
    return script[: script.index("\nIFS=")]


@pytest.mark.parametrize("golden", sorted(CASES))
def test_the_header_lists_the_exit_codes_the_script_can_end_with(golden: str) -> None:
    script = render_script(make_plan(**CASES[golden]))
    header = _header(script)
    for code, meaning in EXIT_CODES.items():
        listed = f"\n#   {code}  {meaning.split()[0]} " in header
        assert listed == (f"die {code} " in script), code
    inspect = _header(render_script(make_plan("inspect_sqsh", source=SQSH, role="serving")))
    # an inspect can meet an architecture record (73) and a node of another architecture (81),
    # never a registry (79) or an imported config (82)
    assert "#   73  " in inspect and "#   81  " in inspect
    assert "#   79  " not in inspect and "#   82  " not in inspect


def test_the_header_says_why_the_job_reexecutes_itself() -> None:
    header = _header(render_script(make_plan()))
    for reason in ("--export=NIL", "SLURM_JWT", "BASH_ENV", "env -i", "no environment can forge"):
        assert reason in header
    for variable in ("SLURM_JOB_ID", "SLURM_RESTART_COUNT", "SLURM_CPUS_ON_NODE"):
        assert variable in header


@pytest.mark.parametrize(
    ("profile", "before_curl"),
    [(PROFILE, IMPORT_STEPS_BEFORE_CURL), (STREAM_PROFILE, STREAM_IMPORT_STEPS_BEFORE_CURL)],
    ids=["enroot", "stream"],
)
def test_the_import_script_is_its_steps_in_order(
    profile: dict[str, Any], before_curl: tuple[str, ...]
) -> None:
    script = render_script(make_plan(profile=profile))
    names = (
        *CHECK_STEPS,
        *before_curl,
        *IMPORT_STEPS_AFTER_CURL,
        *IMAGE_STEPS_BEFORE_STAGE,
        *IMAGE_STEPS_AFTER_STAGE,
    )
    position = script.index("\ndie() {")
    for name in names:
        found = script.find(job_steps.step(name), position)
        assert found >= position, f"{name} missing or out of order"
        position = found + len(job_steps.step(name))
    assert position == len(script)


def test_the_inspect_script_is_its_steps_without_the_import() -> None:
    script = render_script(make_plan("inspect_sqsh", source=SQSH, role="serving"))
    before = "".join(job_steps.step(name) for name in (*CHECK_STEPS, *IMAGE_STEPS_BEFORE_STAGE))
    after = "".join(job_steps.step(name) for name in IMAGE_STEPS_AFTER_STAGE)
    assert script.endswith(after)
    assert before in script
    for name in (*IMPORT_STEPS_BEFORE_CURL, *IMPORT_STEPS_AFTER_CURL):
        assert job_steps.step(name) not in script


def test_every_shipped_step_is_rendered_by_a_job() -> None:
    rendered = {
        "00-reexec",
        *CHECK_STEPS,
        *IMPORT_STEPS_BEFORE_CURL,
        *STREAM_IMPORT_STEPS_BEFORE_CURL,
        *IMPORT_STEPS_AFTER_CURL,
        *IMAGE_STEPS_BEFORE_STAGE,
        *IMAGE_STEPS_AFTER_STAGE,
        *VERIFYING_CURL_STEPS,
        *STAGE_STEPS,
        *DOCTOR_STEPS,
    }
    assert job_steps.names() == rendered


@pytest.mark.parametrize("name", sorted(job_steps.names()))
def test_no_step_spells_a_workspace_path(name: str) -> None:
    """The workspace's layout is the plan's (domain/paths.py): the steps read its assignments."""
    text = job_steps.step(name)
    for literal in ("images/", ".tmp/", "chain.json", "candidate.sqsh", "$JOB_DIR/", "${JOB_DIR%"):
        assert literal not in text, literal


def test_an_unknown_step_is_refused() -> None:
    with pytest.raises(ValueError, match="no job step named"):
        job_steps.step("11-publish")


# -- generated plans -----------------------------------------------------------------------------

_segment = st.one_of(
    st.text(alphabet="ab-_.$`'\" ;&|*?~!(){}[]<>=:,%#\\é☃", min_size=1, max_size=8),
    st.text(
        alphabet=st.characters(
            codec="utf-8", exclude_characters="/\x00", exclude_categories=["Cc", "Cs"]
        ),
        min_size=1,
        max_size=8,
    ),
)
# Workspace-like paths: shell-special but within the mount and #SBATCH rules, so few are rejected.
_safe_segment = st.text(alphabet="ab-_$`;&|*?~!(){}[]<>=+@^é☃.", min_size=1, max_size=8).filter(
    lambda segment: segment not in {".", ".."}
)
_safe_root = st.lists(_safe_segment, min_size=1, max_size=3).map(
    lambda parts: "/" + "/".join(parts)
)
# Roots the workspace rule must refuse because sbatch would reinterpret them.
_sbatch_special_root = st.builds(
    lambda root, special: f"{root}{special}x", _safe_root, st.sampled_from(["#", "'", '"', "%"])
)
_root = st.lists(_segment, min_size=1, max_size=3).map(lambda parts: "/" + "/".join(parts))
_sqsh = st.builds(lambda root, stem: f"{root}/{stem}.sqsh", _root, _segment)
_slurm = st.from_regex(paths.SLURM_NAME_PATTERN, fullmatch=True)
_env_value = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cc", "Cs"]), max_size=30
)


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    profile = copy.deepcopy(PROFILE)
    profile["workspace_root"] = draw(st.one_of(_safe_root, _root, _sbatch_special_root))
    build = profile["image_build"]
    build["partition"] = draw(_slurm)
    if draw(st.booleans()):
        build["account"] = draw(_slurm)
    if draw(st.booleans()):
        build["qos"] = draw(_slurm)
    build["cpus_per_task"] = draw(st.integers(1, 99999))
    build["memory"] = f"{draw(st.integers(1, 10**6))}{draw(st.sampled_from('KMGT'))}"
    build["time_limit"] = (
        f"{draw(st.integers(0, 999))}:{draw(st.integers(0, 59)):02}:{draw(st.integers(1, 59)):02}"
    )
    if draw(st.booleans()):
        build["local_scratch"] = draw(_safe_root)
    if draw(st.booleans()):
        build["job_path"] = ":".join(draw(st.lists(_safe_root, min_size=1, max_size=3)))
    profile["enroot"] = {
        "environment": draw(
            st.dictionaries(
                st.sampled_from(
                    ["ENROOT_SQUASH_OPTIONS", "ENROOT_TRANSFER_RETRIES", "ENROOT_ALLOW_HTTP"]
                ),
                _env_value,
                max_size=2,
            )
        )
    }
    role = draw(st.sampled_from(["client", "serving"]))
    try:
        if draw(st.booleans()):
            return make_plan(profile=profile, role=role)
        return make_plan("inspect_sqsh", source=draw(_sqsh), profile=profile, role=role)
    except DomainError:
        reject()


@given(plans())
def test_generated_scripts_pass_bash_n_and_read_back_every_value(plan: Plan) -> None:
    script = render_script(plan)
    bash_syntax_ok(script)
    assert not re.search(r"--gres|--gpus", script)
    if plan.operation == "inspect_sqsh":
        assert "enroot import" not in script
    # Run the assignments and the site environment (only) and read the values back.
    settings = [
        line
        for line in script.splitlines()
        if line.startswith("readonly ") or line.startswith("export ENROOT_")
    ]
    env = plan.profile.enroot.environment
    layout = paths.AttemptLayout(plan.profile.workspace_root, plan.lifecycle_id)
    probe = "\n".join(
        [
            *settings,
            'printf \'%s\\0\' "$SQSH" "$JOB_DIR" "$LOCAL_SCRATCH" "$SOURCE_URI" "$JOB_PATH"',
            'printf \'%s\\0\' "$WORKSPACE_ROOT" "${ATTEMPT_PARENTS[@]}" "$JOB_ENROOT"',
        ]
        + [f"printf '%s\\0' \"${key}\"" for key in sorted(env)]
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", probe],
        capture_output=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
        timeout=30,
    )
    expected = [
        plan.paths.sqsh,
        plan.paths.job_dir,
        plan.profile.image_build.local_scratch or "",
        plan.enroot_uri or "",
        plan.profile.image_build.job_path,
        layout.root,
        layout.images,
        layout.tmp,
        layout.jobs,
        f"{plan.paths.job_dir}/enroot",
        *[env[key] for key in sorted(env)],
    ]
    assert done.stdout.split(b"\0")[:-1] == [value.encode() for value in expected]


_SBATCH_SPECIAL = re.compile(r"[\s#'\"\\]")


@given(plans())
def test_generated_directives_hold_nothing_sbatch_would_reinterpret(plan: Plan) -> None:
    lines = directives(render_script(plan))
    assert len(lines) >= 12
    for line in lines:
        value = line.removeprefix("#SBATCH ")
        assert not _SBATCH_SPECIAL.search(value), line
    expected_percent = 2  # the %j of --output and --error, and nothing else
    assert sum(line.count("%") for line in lines) == expected_percent
