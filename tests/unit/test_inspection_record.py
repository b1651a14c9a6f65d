"""Host-side validation of the inspection record: every rule refuses, naming field and rule.

Schema version 1 records (published before 2.0.0 of the inspector), version 2 records (the
interpreter's path and the shadowed copies added) and version 3 records (the machine the image's
python3 ran as) are all accepted."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import ValidationError

from slurm_image.domain.errors import InvalidInspection
from slurm_image.domain.inspection import (
    MAX_INSPECTION_BYTES,
    SCHEMA_VERSION,
    ClientFacts,
    InspectionRecord,
    ServingFacts,
    validate_inspection,
)

SHA = "ab" * 32
OTHER_SHA = "cd" * 32

CLIENT: dict[str, Any] = {
    "schema_version": 1,
    "inspector_version": "1.0.0",
    "role": "client",
    "sqsh_sha256": SHA,
    "facts": {
        "python": {"implementation": "cpython", "version": "3.11.2", "abi": "cp311"},
        "distributions": [
            {"name": "numpy", "version": "1.26.4"},
            {"name": "pip", "version": "23.0.1"},
            {"name": "typing-extensions", "version": "4.9.0"},
        ],
        "installer": {"name": "pip", "version": "23.0.1", "path": "/usr/bin/pip"},
    },
}
SERVING: dict[str, Any] = {
    "schema_version": 1,
    "inspector_version": "1.0.0",
    "role": "serving",
    "sqsh_sha256": SHA,
    "facts": {"server": {"name": "vllm", "version": "0.6.3", "path": "/usr/local/bin/vllm"}},
}


CLIENT_V2: dict[str, Any] = {
    "schema_version": 2,
    "inspector_version": "2.0.0",
    "role": "client",
    "sqsh_sha256": SHA,
    "facts": {
        "python": {
            "implementation": "cpython",
            "version": "3.11.2",
            "abi": "cp311",
            "executable": "/usr/bin/python3.11",
        },
        "distributions": [
            {"name": "numpy", "version": "1.26.4"},
            {"name": "pip", "version": "24.3.1"},
            {"name": "six", "version": "1.17.0"},
        ],
        "installer": {"name": "pip", "version": "24.3.1", "path": "/usr/local/bin/pip"},
        "shadowed": [
            {"name": "pip", "version": "23.0.1", "location": "/usr/lib/python3/dist-packages"},
            {"name": "six", "version": "1.16.0", "location": "/usr/lib/python3/dist-packages"},
            {"name": "six", "version": "1.15.0", "location": "/opt/old/site-packages"},
        ],
    },
}
SERVING_V2: dict[str, Any] = {
    "schema_version": 2,
    "inspector_version": "2.0.0",
    "role": "serving",
    "sqsh_sha256": SHA,
    "facts": {
        "server": {"name": "vllm", "version": "0.6.3", "path": "/opt/venv/bin/vllm"},
        "shadowed": [
            {
                "name": "vllm",
                "version": "0.5.0",
                "location": "/usr/local/lib/python3.11/dist-packages",
            }
        ],
    },
}


CLIENT_V3: dict[str, Any] = {
    **CLIENT_V2,
    "schema_version": 3,
    "inspector_version": "3.0.0",
    "machine": "aarch64",
}
SERVING_V3: dict[str, Any] = {
    **SERVING_V2,
    "schema_version": 3,
    "inspector_version": "3.0.0",
    "machine": "x86_64",
}


def encode(record: Any) -> bytes:
    return json.dumps(record).encode()


def changed(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    record = copy.deepcopy(base)
    *parents, last = path.split(".")
    target: Any = record
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return record


def refusal(data: bytes, role: str = "client", sqsh: str = SHA, **kw: Any) -> InvalidInspection:
    with pytest.raises(InvalidInspection) as caught:
        validate_inspection(data, role=role, sqsh_sha256=sqsh, **kw)  # type: ignore[arg-type]
    return caught.value


def test_accepts_a_client_record() -> None:
    record = validate_inspection(encode(CLIENT), role="client", sqsh_sha256=SHA)
    assert isinstance(record.facts, ClientFacts)
    assert record.facts.installer.path == "/usr/bin/pip"
    assert record.facts.version_of("numpy") == "1.26.4"
    assert record.facts.version_of("absent") is None


def test_accepts_a_serving_record() -> None:
    record = validate_inspection(encode(SERVING), role="serving", sqsh_sha256=SHA)
    assert isinstance(record.facts, ServingFacts)
    assert record.facts.server.version == "0.6.3"


def test_record_is_frozen() -> None:
    record = validate_inspection(encode(SERVING), role="serving", sqsh_sha256=SHA)
    with pytest.raises(ValidationError):
        record.role = "client"  # type: ignore[misc]


def test_refuses_oversize_before_parsing() -> None:
    data = encode(CLIENT)
    error = refusal(data, max_bytes=len(data) - 1)
    assert (error.field, error.value) == ("inspection", len(data))
    assert refusal(b" " * (MAX_INSPECTION_BYTES + 1)).field == "inspection"


@pytest.mark.parametrize(
    "data",
    [b"", b"{", b"not json", b"\xff\xfe{}", b'{"a": NaN}', b"[1, 2]", b'"client"', b"null"],
)
def test_refuses_what_is_not_one_json_object(data: bytes) -> None:
    assert refusal(data).field == "inspection"


@pytest.mark.parametrize(
    "data",
    [
        b'{"facts": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"schema_version": 1' + b"0" * 5000 + b"}",
    ],
    ids=["nested-100000-deep", "integer-of-5001-digits"],
)
def test_refuses_hostile_json_within_the_size_bound_as_invalid(data: bytes) -> None:
    # both fit in the size bound; the parser must not escape with RecursionError / ValueError
    assert len(data) <= MAX_INSPECTION_BYTES
    assert refusal(data).field == "inspection"


def test_refuses_duplicate_keys() -> None:
    data = encode(CLIENT)[:-1] + b', "role": "client"}'
    error = refusal(data)
    assert (error.field, error.rule) == ("role", "each key at most once")


@pytest.mark.parametrize("version", [0, 4, "1", "2", True, 2.0])
def test_refuses_other_schema_version(version: Any) -> None:
    for base in (CLIENT, CLIENT_V2, CLIENT_V3):
        assert refusal(encode(changed(base, "schema_version", version))).field == "schema_version"


def test_the_inspector_writes_the_newest_version_the_host_accepts() -> None:
    import slurm_image.inspector.inspect_image as inspect_image

    assert inspect_image.SCHEMA_VERSION == SCHEMA_VERSION == CLIENT_V3["schema_version"]


@pytest.mark.parametrize("base", [CLIENT_V3, SERVING_V3], ids=["client", "serving"])
def test_accepts_a_version_3_record_with_the_machine_the_image_ran_as(base: dict[str, Any]) -> None:
    record = validate_inspection(encode(base), role=base["role"], sqsh_sha256=SHA)
    assert record.machine == base["machine"]
    assert record.model_dump(mode="json") == base


@pytest.mark.parametrize("base", [CLIENT, SERVING, CLIENT_V2, SERVING_V2])
def test_older_records_read_as_of_unknown_machine_and_dump_without_it(
    base: dict[str, Any],
) -> None:
    record = validate_inspection(encode(base), role=base["role"], sqsh_sha256=SHA)
    assert record.machine is None
    assert "machine" not in record.model_dump(mode="json")


@pytest.mark.parametrize(
    "machine", ["", "x86 64", "-aarch64", "a" * 65, "aarch64\n", 64, ["aarch64"]]
)
def test_refuses_a_machine_that_is_no_platform_machine_name(machine: Any) -> None:
    assert refusal(encode(changed(CLIENT_V3, "machine", machine))).field == "machine"


def test_accepts_a_version_2_client_record_with_executable_and_shadowed_copies() -> None:
    record = validate_inspection(encode(CLIENT_V2), role="client", sqsh_sha256=SHA)
    assert isinstance(record.facts, ClientFacts)
    assert record.schema_version == 2
    assert record.facts.python.executable == "/usr/bin/python3.11"
    assert record.facts.version_of("pip") == "24.3.1"
    shadowed = [(s.name, s.version, s.location) for s in record.facts.shadowed]
    assert shadowed == [
        ("pip", "23.0.1", "/usr/lib/python3/dist-packages"),
        ("six", "1.16.0", "/usr/lib/python3/dist-packages"),
        ("six", "1.15.0", "/opt/old/site-packages"),
    ]
    assert record.model_dump(mode="json") == CLIENT_V2


def test_accepts_a_version_2_serving_record() -> None:
    record = validate_inspection(encode(SERVING_V2), role="serving", sqsh_sha256=SHA)
    assert isinstance(record.facts, ServingFacts)
    assert record.facts.shadowed[0].version == "0.5.0"
    assert record.model_dump(mode="json") == SERVING_V2


def test_a_version_2_record_without_shadowed_copies_lists_none() -> None:
    record = validate_inspection(
        encode(changed(CLIENT_V2, "facts.shadowed", [])), role="client", sqsh_sha256=SHA
    )
    assert record.facts.shadowed == ()


def test_version_1_records_read_as_no_executable_and_nothing_shadowed() -> None:
    client = validate_inspection(encode(CLIENT), role="client", sqsh_sha256=SHA)
    serving = validate_inspection(encode(SERVING), role="serving", sqsh_sha256=SHA)
    assert isinstance(client.facts, ClientFacts)
    assert (client.facts.python.executable, client.facts.shadowed) == (None, ())
    assert serving.facts.shadowed == ()


def _without(base: dict[str, Any], path: str) -> dict[str, Any]:
    record = copy.deepcopy(base)
    *parents, last = path.split(".")
    target = record
    for part in parents:
        target = target[part]
    del target[last]
    return record


@pytest.mark.parametrize(
    ("record", "role", "field", "rule"),
    [
        (
            _without(CLIENT_V2, "facts.python.executable"),
            "client",
            "facts.python.executable",
            "required",
        ),
        (_without(CLIENT_V2, "facts.shadowed"), "client", "facts.shadowed", "required"),
        (_without(SERVING_V2, "facts.shadowed"), "serving", "facts.shadowed", "required"),
        (
            changed(CLIENT, "facts.python.executable", "/usr/bin/python3"),
            "client",
            "facts.python.executable",
            "not allowed",
        ),
        (changed(CLIENT, "facts.shadowed", []), "client", "facts.shadowed", "not allowed"),
        (changed(SERVING, "facts.shadowed", []), "serving", "facts.shadowed", "not allowed"),
        (_without(CLIENT_V3, "machine"), "client", "machine", "required"),
        (changed(CLIENT_V3, "machine", None), "client", "machine", "required"),
        (changed(CLIENT_V2, "machine", "x86_64"), "client", "machine", "not allowed"),
        (changed(SERVING, "machine", "x86_64"), "serving", "machine", "not allowed"),
    ],
    ids=[
        "v2-no-executable",
        "v2-no-shadowed",
        "v2-serving-no-shadowed",
        "v1-executable",
        "v1-shadowed",
        "v1-serving-shadowed",
        "v3-no-machine",
        "v3-machine-null",
        "v2-machine",
        "v1-serving-machine",
    ],
)
def test_the_version_decides_which_facts_a_record_has(
    record: dict[str, Any], role: str, field: str, rule: str
) -> None:
    error = refusal(encode(record), role=role)
    assert error.field == field
    assert rule in error.rule and f"schema version {record['schema_version']}" in error.rule


@pytest.mark.parametrize(
    "executable",
    [
        "python3",
        "/usr/bin/../bin/python3",
        "/usr/./bin/python3",
        "//usr/bin/python3",
        "/usr/bin/py\nthon",
        "",
        None,
        3,
    ],
)
def test_refuses_an_interpreter_path_not_absolute_and_normalized(executable: Any) -> None:
    error = refusal(encode(changed(CLIENT_V2, "facts.python.executable", executable)))
    assert error.field == "facts.python.executable"


@pytest.mark.parametrize(
    ("shadowed", "rule"),
    [
        (
            [
                {"name": "six", "version": "1.16.0", "location": "/usr/lib/python3/dist-packages"},
                {"name": "pip", "version": "23.0.1", "location": "/usr/lib/python3/dist-packages"},
            ],
            "sorted",
        ),
        (
            [
                {"name": "pip", "version": "23.0.1", "location": "/usr/lib/python3/dist-packages"},
                {"name": "pip", "version": "22.0", "location": "/usr/lib/python3/dist-packages"},
            ],
            "once",
        ),
        (
            [{"name": "torch", "version": "2.0.0", "location": "/usr/lib/python3/dist-packages"}],
            "one of the distributions",
        ),
    ],
    ids=["unsorted", "same-location-twice", "not-a-distribution"],
)
def test_refuses_shadowed_copies_out_of_order_or_unknown(shadowed: list[Any], rule: str) -> None:
    error = refusal(encode(changed(CLIENT_V2, "facts.shadowed", shadowed)))
    assert error.field == "facts"
    assert rule in error.rule


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("facts.shadowed.0.name", "Pip"),
        ("facts.shadowed.0.version", "1.0 beta"),
        ("facts.shadowed.0.location", "usr/lib/python3/dist-packages"),
        ("facts.shadowed.0.location", "/usr/lib/python3/../python3/dist-packages"),
        ("facts.shadowed.0.location", "/usr/lib/\x1b[2Jpython3"),
        ("facts.shadowed.0.extra", 1),
    ],
)
def test_refuses_malformed_shadowed_facts(path: str, value: Any) -> None:
    assert refusal(encode(changed(CLIENT_V2, path, value))).field == path
    assert refusal(encode(changed(SERVING_V2, path, value)), role="serving").field == path


def test_refuses_role_mismatch() -> None:
    error = refusal(encode(CLIENT), role="serving")
    assert (error.field, error.value) == ("role", "client")


def test_refuses_digest_mismatch() -> None:
    error = refusal(encode(CLIENT), sqsh=OTHER_SHA)
    assert (error.field, error.value) == ("sqsh_sha256", SHA)


@pytest.mark.parametrize("value", ["AB" * 32, "ab" * 31, "ab" * 32 + "\n", 7])
def test_refuses_malformed_digest(value: Any) -> None:
    assert refusal(encode(changed(CLIENT, "sqsh_sha256", value))).field == "sqsh_sha256"


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("extra", "extra"),
        ("facts.extra", "facts.extra"),
        ("facts.python.extra", "facts.python.extra"),
        ("facts.installer.extra", "facts.installer.extra"),
    ],
)
def test_refuses_extra_keys(path: str, field: str) -> None:
    assert refusal(encode(changed(CLIENT, path, 1))).field == field


def test_refuses_missing_keys() -> None:
    record = copy.deepcopy(CLIENT)
    del record["facts"]["installer"]
    assert refusal(encode(record)).field == "facts.installer"
    record = copy.deepcopy(CLIENT)
    del record["inspector_version"]
    assert refusal(encode(record)).field == "inspector_version"


def test_refuses_installer_not_among_distributions() -> None:
    record = changed(CLIENT, "facts.distributions", [{"name": "numpy", "version": "1.26.4"}])
    error = refusal(encode(record))
    assert error.field == "facts"
    assert "installer" in error.rule


def test_refuses_installer_version_unlike_its_distribution() -> None:
    error = refusal(encode(changed(CLIENT, "facts.installer.version", "24.0")))
    assert "installer" in error.rule


@pytest.mark.parametrize(
    "distributions",
    [
        [],
        [{"name": "pip", "version": "23.0.1"}, {"name": "numpy", "version": "1.26.4"}],
        [{"name": "pip", "version": "23.0.1"}, {"name": "pip", "version": "23.0.1"}],
    ],
    ids=["empty", "unsorted", "duplicate"],
)
def test_refuses_distributions_not_sorted_and_unique(distributions: list[Any]) -> None:
    assert refusal(encode(changed(CLIENT, "facts.distributions", distributions))).field.startswith(
        "facts"
    )


@pytest.mark.parametrize("name", ["Typing_Extensions", "typing_extensions", "a--b", "-a", ""])
def test_refuses_names_not_normalized(name: str) -> None:
    error = refusal(encode(changed(CLIENT, "facts.distributions.2.name", name)))
    assert error.field == "facts.distributions.2.name"


@pytest.mark.parametrize("version", ["", "1.0 beta", "1.0\n", "x" * 129])
def test_refuses_malformed_versions(version: str) -> None:
    error = refusal(encode(changed(CLIENT, "facts.distributions.0.version", version)))
    assert error.field == "facts.distributions.0.version"


@pytest.mark.parametrize(
    "path",
    [
        "pip",
        "bin/pip",
        "/usr/bin/../bin/pip",
        "/usr/./bin/pip",
        "//usr/bin/pip",
        "/usr/bin/pi\np",
        "/usr/bin/pi\x7fp",
        "/usr/bin/pi\x9b2Jp",
        "/usr/bin/pi\x85p",
        "/",
    ],
)
def test_refuses_executable_paths_not_absolute_and_normalized(path: str) -> None:
    assert refusal(encode(changed(CLIENT, "facts.installer.path", path))).field.startswith(
        "facts.installer"
    )


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("facts.python.version", "3.11"),
        ("facts.python.version", "3.13.0rc1"),
        ("facts.python.implementation", "CPython"),
        ("facts.python.abi", "cp311-x86_64"),
        ("facts.installer.name", "uv"),
    ],
)
def test_refuses_malformed_python_and_installer_facts(path: str, value: str) -> None:
    assert refusal(encode(changed(CLIENT, path, value))).field == path


def test_refuses_facts_of_the_other_role() -> None:
    record = changed(CLIENT, "facts", SERVING["facts"])
    assert refusal(encode(record)).field == "facts"
    record = changed(SERVING, "facts", CLIENT["facts"])
    assert refusal(encode(record), role="serving").field == "facts"


def test_refuses_a_server_that_is_not_vllm() -> None:
    record = changed(SERVING, "facts.server.name", "tgi")
    assert refusal(encode(record), role="serving").field == "facts.server.name"


def test_model_rejects_mixed_facts_directly() -> None:
    with pytest.raises(ValidationError):
        InspectionRecord.model_validate_json(encode(changed(SERVING, "role", "client")))
