"""The gateway over real HTTP (tests/gateway_lab.py): who may do what, what the history names,
what the others see of a private image."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway_lab import PRIVATE_GROUP, SOURCE, GatewayLab, gateway_lab
from slurm_image.domain.credentials import RegistryCredentials
from slurm_image.wire.exit_codes import EXIT_FORBIDDEN, EXIT_INVALID
from slurm_image.wire.remote_error import RemoteError

OTHER_SOURCE = f"registry.example.org/team/other:2@sha256:{'e' * 64}"


@pytest.fixture
def lab() -> Iterator[GatewayLab]:
    with gateway_lab('admins = ["carol"]') as running:
        yield running


def published(
    lab: GatewayLab, user: str, name: str, source: str = SOURCE, **options: object
) -> str:
    """``user`` imports ``source`` as ``name``, its job succeeds, and it is published."""
    client = lab.client(user)
    outcome = client.import_image(source, name=name, role="client", **options)  # type: ignore[arg-type]
    lab.run_job(outcome.lifecycle_id)
    client.wait([outcome.lifecycle_id], timeout_s=10)
    client.publish(outcome.lifecycle_id)
    return outcome.lifecycle_id


def refusal(call: object, *args: object, **kwargs: object) -> RemoteError:
    with pytest.raises(RemoteError) as raised:
        call(*args, **kwargs)  # type: ignore[operator]
    return raised.value


def test_the_alias_belongs_to_its_requester_and_the_history_names_them(lab: GatewayLab) -> None:
    published(lab, "alice", "a")
    assert lab.alias_file("a")["owner"] == {"user": "alice", "uid": lab.uid("alice")}
    shown = lab.client("bob").catalog_show("a")
    assert (shown.owned.user, shown.owned.group) == ("alice", None)
    events = lab.client("bob").history("a").events
    assert [(e.event, e.user, e.uid) for e in events] == [("published", "alice", lab.uid("alice"))]
    assert lab.service not in {event.user for event in events}


def test_another_user_may_not_replace_or_unregister_and_is_told_whose_it_is(
    lab: GatewayLab,
) -> None:
    published(lab, "alice", "a")
    bob = lab.client("bob")
    refused = refusal(bob.unregister, "a")
    assert refused.exit_code == EXIT_FORBIDDEN
    assert "alice" in refused.rule
    refused = refusal(bob.import_image, OTHER_SOURCE, name="a", role="client", replace=True)
    assert refused.exit_code == EXIT_FORBIDDEN
    assert refused.field == "name"
    assert not list(Path(lab.layout.jobs).iterdir())[1:], "nothing staged for the refused import"
    assert lab.client("alice").catalog_show("a").record["lifecycle_id"]


def test_the_owner_the_group_and_the_admins_may_change_an_alias(lab: GatewayLab) -> None:
    published(lab, "alice", "a", group="physics")
    assert lab.client("bob").unregister("a") == "a"  # bob is in physics
    published(lab, "alice", "b")
    assert lab.client("carol").unregister("b") == "b"  # carol is an admin
    published(lab, "alice", "c")
    assert lab.client("alice").unregister("c") == "c"


def test_a_group_the_requester_is_not_in_is_refused_before_anything_is_staged(
    lab: GatewayLab,
) -> None:
    refused = refusal(
        lab.client("dave").import_image, SOURCE, name="a", role="client", group="physics"
    )
    assert (refused.exit_code, refused.field) == (EXIT_FORBIDDEN, "group")
    assert not Path(lab.layout.jobs).exists() or not list(Path(lab.layout.jobs).iterdir())


def test_gc_is_for_the_admins(lab: GatewayLab) -> None:
    refused = refusal(lab.client("alice").gc, older_than=__import__("datetime").timedelta(days=7))
    assert (refused.exit_code, refused.field) == (EXIT_FORBIDDEN, "gc")
    assert lab.client("carol").gc(older_than=__import__("datetime").timedelta(days=7)) == []


def private_import(lab: GatewayLab, user: str = "alice", group: str = PRIVATE_GROUP) -> str:
    client = lab.client(user)
    login = RegistryCredentials(host="registry.example.org", login=user, password="s3cret-pw")
    outcome = client.import_image(
        SOURCE, name="secret", role="client", group=group, credentials=login
    )
    lab.run_job(outcome.lifecycle_id)
    client.wait([outcome.lifecycle_id], timeout_s=10)
    client.publish(outcome.lifecycle_id)
    return outcome.lifecycle_id


def test_a_private_image_is_its_groups_alone_and_404_to_everyone_else(lab: GatewayLab) -> None:
    private_import(lab)
    alias = Path(lab.layout.alias("secret")).stat()
    assert stat.S_IMODE(alias.st_mode) == 0o640 and alias.st_gid == 1
    entry = lab.client("alice").catalog_show("secret")
    artifact = Path(str(entry.record["path"])).stat()
    assert stat.S_IMODE(artifact.st_mode) == 0o440 and artifact.st_gid == 1
    bob = lab.client("bob")
    assert refusal(bob.catalog_show, "secret").exit_code == EXIT_INVALID
    assert "secret" not in [s["name"] for s in bob.catalog_summaries()]
    assert refusal(bob.history, "secret").exit_code == EXIT_INVALID
    assert all(event.alias != "secret" for event in bob.history().events)
    assert refusal(bob.unregister, "secret").exit_code == EXIT_INVALID
    assert [e.alias for e in lab.client("alice").history().events] == ["secret"]


def test_the_password_is_staged_for_the_job_and_never_kept(lab: GatewayLab) -> None:
    lifecycle_id = private_import(lab)
    plan = (Path(lab.layout.jobs) / lifecycle_id / "plan.json").read_text()
    assert "s3cret-pw" not in plan
    assert '"credentials_host": "registry.example.org"' in plan
    for path in Path(lab.layout.images).rglob("*"):
        if path.is_file() and path.name != ".credentials":
            assert b"s3cret-pw" not in path.read_bytes(), path


def test_a_private_import_must_name_a_group_the_gateway_can_keep_it_for(lab: GatewayLab) -> None:
    login = RegistryCredentials(host="registry.example.org", login="alice", password="pw")
    client = lab.client("alice")
    refused = refusal(client.import_image, SOURCE, name="s", role="client", credentials=login)
    assert (refused.exit_code, refused.field) == (EXIT_INVALID, "group")
    refused = refusal(
        client.import_image, SOURCE, name="s", role="client", group="physics", credentials=login
    )
    assert (refused.exit_code, refused.field) == (EXIT_FORBIDDEN, "group")
    assert lab.service in refused.rule
    other = RegistryCredentials(host="other.example.org", login="alice", password="pw")
    refused = refusal(
        client.import_image, SOURCE, name="s", role="client", group=PRIVATE_GROUP, credentials=other
    )
    assert (refused.exit_code, refused.field) == (EXIT_INVALID, "credentials")


def test_a_private_source_answers_only_its_group_from_the_store(lab: GatewayLab) -> None:
    private_import(lab)
    jobs = len(lab.scheduler.jobs)
    outcome = lab.client("bob").import_image(SOURCE, name="mine", role="client")
    assert not outcome.from_store
    assert len(lab.scheduler.jobs) == jobs + 1, "bob's import runs its own job"


@pytest.mark.parametrize("user", ["dave", "alice"])
def test_a_public_import_of_bytes_kept_for_a_group_names_a_file_everyone_reads(
    lab: GatewayLab, user: str
) -> None:
    private_import(lab)
    kept = Path(str(lab.client("alice").catalog_show("secret").record["path"]))
    assert stat.S_IMODE(kept.stat().st_mode) == 0o440
    jobs = len(lab.scheduler.jobs)
    published(lab, user, "shared")
    assert len(lab.scheduler.jobs) == jobs + 1, "the group's artifact answers no public import"
    alias = Path(lab.layout.alias("shared"))
    assert stat.S_IMODE(alias.stat().st_mode) == 0o644
    record = lab.client("bob").catalog_show("shared").record
    artifact = Path(str(record["path"])).stat()
    assert stat.S_IMODE(artifact.st_mode) & 0o444 == 0o444, "others may read what it names"
    assert lab.client("alice").catalog_show("secret").record["sqsh_sha256"] == record["sqsh_sha256"]


def test_a_public_import_joins_no_import_kept_for_a_group(lab: GatewayLab) -> None:
    login = RegistryCredentials(host="registry.example.org", login="alice", password="pw")
    alice = lab.client("alice")
    kept = alice.import_image(
        SOURCE, name="secret", role="client", group=PRIVATE_GROUP, credentials=login
    )
    public = alice.import_image(SOURCE, name="shared", role="client")
    assert (public.joined, public.lifecycle_id != kept.lifecycle_id) == (False, True)
    again = alice.import_image(
        SOURCE, name="again", role="client", group=PRIVATE_GROUP, credentials=login
    )
    assert (again.joined, again.lifecycle_id) == (True, kept.lifecycle_id)


def test_the_service_account_runs_every_job_and_the_comment_names_the_requester(
    lab: GatewayLab,
) -> None:
    outcome = lab.client("alice").import_image(SOURCE, name="a", role="client")
    job = lab.scheduler.job(outcome.job_id or "")
    assert job.spec.comment == f"slurm-image:{outcome.lifecycle_id};requester=alice"


def test_a_change_of_a_requesters_groups_holds_from_their_next_request(lab: GatewayLab) -> None:
    for name in ("a", "b", "c"):
        published(lab, "alice", name, group="physics")
    bob, dave = lab.client("bob"), lab.client("dave")
    assert refusal(dave.unregister, "a").exit_code == EXIT_FORBIDDEN
    assert bob.unregister("a") == "a"
    lab.accounts.add_member("physics", "dave")
    lab.accounts.groups["physics"].members.discard("bob")
    assert dave.unregister("b") == "b"
    assert refusal(bob.unregister, "c").exit_code == EXIT_FORBIDDEN


def test_a_requesters_verbs_are_built_once_and_anew_when_their_account_changes(
    lab: GatewayLab, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []
    build = lab.lifecycles.acting_for

    def counted(requester: Any, *, host: str) -> Any:
        built.append(requester.user)
        return build(requester, host=host)

    monkeypatch.setattr(lab.lifecycles, "acting_for", counted)
    alice, bob = lab.client("alice"), lab.client("bob")
    for _ in range(3):
        alice.catalog_summaries()
        bob.catalog_summaries()
    assert built == ["alice", "bob"]
    lab.accounts.add_member("physics", "dave")
    lab.accounts.add_member("physics", "alice")  # already in: her account is unchanged
    lab.accounts.add_group("chemistry", 22002, ("alice",))
    alice.catalog_summaries()
    bob.catalog_summaries()
    assert built == ["alice", "bob", "alice"]


def test_a_403_is_a_refusal_in_the_history_naming_who_was_refused(lab: GatewayLab) -> None:
    published(lab, "alice", "a")
    refusal(lab.client("bob").unregister, "a")
    refusal(lab.client("dave").gc, older_than=__import__("datetime").timedelta(days=1))
    refused = [e for e in lab.history() if e["event"] == "refused"]
    assert [(e["rule"], e["user"], e["alias"], e["exit_code"]) for e in refused] == [
        ("forbidden", "bob", "a", EXIT_FORBIDDEN),
        ("forbidden", "dave", None, EXIT_FORBIDDEN),
    ]
    assert "alice" in refused[0]["reason"]
    assert Path(lab.layout.alias("a")).exists()


def test_history_of_a_hidden_alias_and_of_a_name_never_used_answer_alike(lab: GatewayLab) -> None:
    private_import(lab)
    bob = lab.client("bob")
    hidden = refusal(bob.history, "secret")
    never = refusal(bob.history, "never-published")
    assert (hidden.exit_code, hidden.rule.replace("secret", "X")) == (
        never.exit_code,
        never.rule.replace("never-published", "X"),
    )


def finish_as(lab: GatewayLab, user: str, lifecycle_id: str, **request: Any) -> Any:
    """``/finish`` of ``lifecycle_id`` asked by ``user`` with the request it says it made."""
    import httpx

    body = {"operation": "import_oci", "name": "mine", "role": "client", "source": SOURCE}
    return httpx.post(
        f"{lab.url}/v1/lifecycles/{lifecycle_id}/finish",
        json={"request": body | request, "replace": False},
        headers={"Authorization": f"Munge {lab.credential(user)}"},
        timeout=30,
    )


def test_finishing_anothers_private_import_binds_nothing(lab: GatewayLab) -> None:
    lifecycle_id = private_import(lab)
    answer = finish_as(lab, "bob", lifecycle_id)
    assert answer.status_code == 404, answer.text
    assert answer.json()["error"]["field"] == "lifecycle_id"
    assert not Path(lab.layout.alias("mine")).exists()
    public = finish_as(lab, "carol", lifecycle_id)
    assert public.status_code == 422, "not even an admin's public alias names the group's file"
    kept = finish_as(lab, "alice", lifecycle_id, group=PRIVATE_GROUP, private=True)
    assert kept.status_code == 200, "an alias private to the group may"


def test_finishing_with_a_group_one_is_not_in_is_refused(lab: GatewayLab) -> None:
    outcome = lab.client("alice").import_image(SOURCE, name="a", role="client")
    lab.run_job(outcome.lifecycle_id)
    lab.local().settle()
    answer = finish_as(lab, "dave", outcome.lifecycle_id, group="physics")
    assert answer.status_code == 403
    assert answer.json()["error"]["field"] == "group"
    assert not Path(lab.layout.alias("mine")).exists()
    assert finish_as(lab, "dave", outcome.lifecycle_id).status_code == 200
    assert lab.alias_file("mine")["owner"]["user"] == "dave"
