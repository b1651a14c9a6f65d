"""Registry credentials: which netrc entry an import stages, in which form, and the rules of the
profile's credentials_file and of the plan's credentials_host."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_image.domain.canonical import canonical_json
from slurm_image.domain.credentials import (
    RegistryCredentials,
    registry_host,
    select_credentials,
    staged_credentials_path,
)
from slurm_image.domain.errors import InvalidProfile, PlanInvariantViolation
from slurm_image.domain.plan import Plan, load_plan
from slurm_image.domain.profile import parse_profile
from slurm_image.domain.script import render_script
from support import PROFILE, SQSH, make_plan

SECRET = "s3cr3t-canary"


@pytest.mark.parametrize(
    ("registry", "host"),
    [
        ("127.0.0.1:5443", "127.0.0.1"),
        ("nvcr.io", "nvcr.io"),
        ("registry-1.docker.io", "registry-1.docker.io"),
        ("[::1]:5000", "::1"),
        ("[fe80::1]", "fe80::1"),
    ],
)
def test_the_host_enroot_matches_is_the_registry_without_its_port(registry: str, host: str) -> None:
    assert registry_host(registry) == host


@pytest.mark.parametrize(
    ("netrc", "registry", "expected"),
    [
        # the host without its port matches, as in Enroot
        (f"machine 127.0.0.1 login u password {SECRET}\n", "127.0.0.1:5443", ("u", SECRET)),
        # an entry written with exactly this port is taken too, and wins
        (
            f"machine 127.0.0.1 login other password x\n"
            f"machine 127.0.0.1:5443 login u password {SECRET}\n",
            "127.0.0.1:5443",
            ("u", SECRET),
        ),
        # one line or many, any whitespace; machine names are case-insensitive
        (f"machine NVCR.io\n  login $oauthtoken\n\tpassword {SECRET}\n", "nvcr.io",
         ("$oauthtoken", SECRET)),
        # Docker Hub is the host Enroot contacts
        (f"machine docker.io login a password b\nmachine registry-1.docker.io login u "
         f"password {SECRET}\n", "registry-1.docker.io", ("u", SECRET)),
        # macdef bodies are skipped up to the empty line
        (f"macdef init\nmachine evil login e password e\n\nmachine nvcr.io login u password "
         f"{SECRET}\n", "nvcr.io", ("u", SECRET)),
    ],
)  # fmt: skip
def test_the_entry_for_the_registry_is_selected(
    netrc: str, registry: str, expected: tuple[str, str]
) -> None:
    found = select_credentials(netrc.encode(), registry)
    assert found is not None
    assert (found.host, found.login, found.password) == (registry_host(registry), *expected)


@pytest.mark.parametrize(
    ("netrc", "registry"),
    [
        ("machine nvcr.io login u password p\n", "127.0.0.1:5443"),
        ("machine 127.0.0.1:5000 login u password p\n", "127.0.0.1:5443"),  # another port
        ("default login u password p\n", "nvcr.io"),  # never sent to every registry
        ("", "nvcr.io"),
        ("machine docker.io login u password p\n", "registry-1.docker.io"),
    ],
)
def test_no_entry_for_the_registry_means_anonymous(netrc: str, registry: str) -> None:
    assert select_credentials(netrc.encode(), registry) is None


@pytest.mark.parametrize(
    ("netrc", "rule"),
    [
        ("machine nvcr.io login u\n", "needs a login and a password"),
        (f"machine nvcr.io password {SECRET}\n", "needs a login and a password"),
        (f'machine nvcr.io login u password "{SECRET} x"\n', "quoted"),
        (f"machine nvcr.io login u password {SECRET}\x01\n", "control character"),
        (f"login u password {SECRET}\n", "before any machine"),
        (f"machine nvcr.io login u password {SECRET} bogus\n", "netrc format"),
        ("machine nvcr.io login u password\n", "has no value"),
        (b"\xff".decode("latin-1"), "UTF-8"),
    ],
)
def test_an_unusable_file_is_refused_without_showing_the_secret(netrc: str, rule: str) -> None:
    data = netrc.encode("latin-1") if netrc == "\xff" else netrc.encode()
    with pytest.raises(InvalidProfile) as caught:
        select_credentials(data, "nvcr.io")
    assert caught.value.field == "enroot.credentials_file"
    assert rule in caught.value.rule
    assert SECRET not in str(caught.value) and caught.value.value is None


def test_the_staged_form_is_one_line_enroot_matches_and_the_repr_hides_the_password() -> None:
    found = select_credentials(
        f"machine 127.0.0.1:5443 login u password {SECRET}\n".encode(), "127.0.0.1:5443"
    )
    assert found is not None
    assert found.netrc_bytes() == f"machine 127.0.0.1 login u password {SECRET}\n".encode()
    assert SECRET not in repr(found)


_word = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters='"'),
    min_size=1,
    max_size=40,
).filter(lambda word: word not in {"machine", "default", "login", "password", "account", "macdef"})


@given(login=_word, password=_word)
def test_a_staged_entry_reads_back_as_itself(login: str, password: str) -> None:
    staged = RegistryCredentials("nvcr.io", login, password).netrc_bytes()
    assert select_credentials(staged, "nvcr.io") == RegistryCredentials("nvcr.io", login, password)


def test_the_staged_path_is_in_the_attempts_private_enroot_config() -> None:
    plan = make_plan()
    path = staged_credentials_path(plan.profile.workspace_root, plan.lifecycle_id)
    assert path == plan.paths.enroot_config + "/.credentials"


# -- the profile ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["~/.config/enroot/.credentials", "/home/u/.netrc"])
def test_profile_accepts_a_credentials_file(value: str) -> None:
    profile = parse_profile({**PROFILE, "enroot": {"credentials_file": value}})
    assert profile.enroot.credentials_file == value


@pytest.mark.parametrize("value", ["relative/netrc", "~other/.netrc", "", "/a\nb", 7])
def test_profile_refuses_a_credentials_file_that_is_not_a_path_of_the_user(value: Any) -> None:
    with pytest.raises(InvalidProfile) as caught:
        parse_profile({**PROFILE, "enroot": {"credentials_file": value}})
    assert caught.value.field == "enroot.credentials_file"


# -- the plan ---------------------------------------------------------------------------------


def _with(plan: Plan, **changes: Any) -> bytes:
    data = plan.model_dump(mode="json")
    data.update(changes)
    return canonical_json(data)


def test_the_plan_names_the_credentials_host_and_nothing_secret() -> None:
    plan = make_plan()
    data = _with(plan, credentials_host="nvcr.io")
    accepted = load_plan(data)
    assert accepted.credentials_host == "nvcr.io"


@pytest.mark.parametrize("host", ["127.0.0.1", "nvcr.io:443", "registry-1.docker.io"])
def test_the_plan_refuses_credentials_for_another_host(host: str) -> None:
    with pytest.raises(PlanInvariantViolation) as caught:
        load_plan(_with(make_plan(), credentials_host=host))
    assert caught.value.field == "credentials_host"


def test_an_inspect_plan_never_carries_credentials() -> None:
    plan = make_plan(operation="inspect_sqsh", source=SQSH, role="serving")
    with pytest.raises(PlanInvariantViolation) as caught:
        load_plan(_with(plan, credentials_host="nvcr.io"))
    assert caught.value.field == "credentials_host"


def test_the_script_names_the_credentials_host_and_an_inspect_script_has_no_import_step() -> None:
    script = render_script(load_plan(_with(make_plan(), credentials_host="nvcr.io")))
    assert "\nreadonly CREDENTIALS_HOST=nvcr.io\n" in script
    assert 'rm -f -- "$staged_credentials"' in script
    inspect = render_script(make_plan(operation="inspect_sqsh", source=SQSH, role="serving"))
    assert "CREDENTIALS_HOST" not in inspect and ".curlrc" not in inspect
    # whatever the operation, the exit trap removes a staged file
    assert 'rm -f -- "$JOB_ENROOT_CONFIG/.credentials"' in inspect
