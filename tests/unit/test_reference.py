"""OCI references: the distribution grammar, our refusals, and Enroot's URI form."""

from __future__ import annotations

import ipaddress
import re
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_image.domain.errors import InvalidReference
from slurm_image.domain.reference import parse_reference
from support import DIGEST, HEX

HUB = "registry-1.docker.io"

# (reference without "@digest", registry as written, repository, tag, Enroot REGISTRY#PATH[:TAG])
VALID: list[tuple[str, str | None, str, str | None, str]] = [
    # Docker Hub, official images, in every spelling
    ("ubuntu", None, "ubuntu", None, f"{HUB}#library/ubuntu"),
    ("ubuntu:24.04", None, "ubuntu", "24.04", f"{HUB}#library/ubuntu:24.04"),
    ("library/ubuntu", None, "library/ubuntu", None, f"{HUB}#library/ubuntu"),
    ("docker.io/ubuntu", "docker.io", "ubuntu", None, f"{HUB}#library/ubuntu"),
    (
        "docker.io/library/ubuntu:22.04",
        "docker.io",
        "library/ubuntu",
        "22.04",
        f"{HUB}#library/ubuntu:22.04",
    ),
    (
        "index.docker.io/library/python:3.11-slim",
        "index.docker.io",
        "library/python",
        "3.11-slim",
        f"{HUB}#library/python:3.11-slim",
    ),
    ("registry-1.docker.io/library/debian", HUB, "library/debian", None, f"{HUB}#library/debian"),
    (
        "registry-1.docker.io/debian:bookworm",
        HUB,
        "debian",
        "bookworm",
        f"{HUB}#library/debian:bookworm",
    ),
    # Docker Hub, namespaced
    (
        "vllm/vllm-openai:v0.6.3",
        None,
        "vllm/vllm-openai",
        "v0.6.3",
        f"{HUB}#vllm/vllm-openai:v0.6.3",
    ),
    (
        "docker.io/pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
        "docker.io",
        "pytorch/pytorch",
        "2.3.0-cuda12.1-cudnn8-runtime",
        f"{HUB}#pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
    ),
    ("localhost/foo", "localhost", "foo", None, "localhost#foo"),
    # Vendor registries
    (
        "nvcr.io/nvidia/pytorch:24.05-py3",
        "nvcr.io",
        "nvidia/pytorch",
        "24.05-py3",
        "nvcr.io#nvidia/pytorch:24.05-py3",
    ),
    (
        "nvcr.io/nvidia/tritonserver:24.05-vllm-python-py3",
        "nvcr.io",
        "nvidia/tritonserver",
        "24.05-vllm-python-py3",
        "nvcr.io#nvidia/tritonserver:24.05-vllm-python-py3",
    ),
    (
        "ghcr.io/huggingface/text-generation-inference:2.0",
        "ghcr.io",
        "huggingface/text-generation-inference",
        "2.0",
        "ghcr.io#huggingface/text-generation-inference:2.0",
    ),
    (
        "quay.io/centos/centos:stream9",
        "quay.io",
        "centos/centos",
        "stream9",
        "quay.io#centos/centos:stream9",
    ),
    (
        "b.gcr.io/test.example.com/my-app:test.example.com",
        "b.gcr.io",
        "test.example.com/my-app",
        "test.example.com",
        "b.gcr.io#test.example.com/my-app:test.example.com",
    ),
    (
        "xn--n3h.com/myimage:xn--n3h.com",
        "xn--n3h.com",
        "myimage",
        "xn--n3h.com",
        "xn--n3h.com#myimage:xn--n3h.com",
    ),
    (
        "sub-dom1.foo.com/bar/baz/quux",
        "sub-dom1.foo.com",
        "bar/baz/quux",
        None,
        "sub-dom1.foo.com#bar/baz/quux",
    ),
    # Hosts with ports, IP addresses, localhost
    ("localhost:5000/foo", "localhost:5000", "foo", None, "localhost:5000#foo"),
    (
        "localhost:5000/team/app:1.0",
        "localhost:5000",
        "team/app",
        "1.0",
        "localhost:5000#team/app:1.0",
    ),
    (
        "registry.example.org:443/a/b",
        "registry.example.org:443",
        "a/b",
        None,
        "registry.example.org:443#a/b",
    ),
    ("test:5000/repo:tag", "test:5000", "repo", "tag", "test:5000#repo:tag"),
    ("192.168.1.1/repo", "192.168.1.1", "repo", None, "192.168.1.1#repo"),
    (
        "192.168.1.1:5000/repo:5050",
        "192.168.1.1:5000",
        "repo",
        "5050",
        "192.168.1.1:5000#repo:5050",
    ),
    ("[2001:db8::1]/repo", "[2001:db8::1]", "repo", None, "[2001:db8::1]#repo"),
    ("[::1]:5000/repo:tag", "[::1]:5000", "repo", "tag", "[::1]:5000#repo:tag"),
    # Grammar corners: separators, one-component names that look like hosts, tag characters
    ("test_com", None, "test_com", None, f"{HUB}#library/test_com"),
    ("foo_bar.com:8080", None, "foo_bar.com", "8080", f"{HUB}#library/foo_bar.com:8080"),
    ("a__b/c---d/e.f_g", None, "a__b/c---d/e.f_g", None, f"{HUB}#a__b/c---d/e.f_g"),
    ("lowercase:Uppercase", None, "lowercase", "Uppercase", f"{HUB}#library/lowercase:Uppercase"),
    ("repo:_tag.with-all_", None, "repo", "_tag.with-all_", f"{HUB}#library/repo:_tag.with-all_"),
    ("a/" * 127 + "a", None, "a/" * 127 + "a", None, f"{HUB}#" + "a/" * 127 + "a"),
    ("repo:" + "t" * 128, None, "repo", "t" * 128, f"{HUB}#library/repo:" + "t" * 128),
    # the 255-character path limit counts the path after the host, never the host
    ("nvcr.io/" + "a" * 255, "nvcr.io", "a" * 255, None, "nvcr.io#" + "a" * 255),
    (
        "registry.example.org:5000/" + "a/" * 127 + "a",
        "registry.example.org:5000",
        "a/" * 127 + "a",
        None,
        "registry.example.org:5000#" + "a/" * 127 + "a",
    ),
    ("a" * 247, None, "a" * 247, None, f"{HUB}#library/" + "a" * 247),
    ("docker.io/" + "a" * 247, "docker.io", "a" * 247, None, f"{HUB}#library/" + "a" * 247),
    # IPv6 literals: hexadecimal digits and colons, either case
    (
        "[2001:DB8::AbC]:5000/repo",
        "[2001:DB8::AbC]:5000",
        "repo",
        None,
        "[2001:DB8::AbC]:5000#repo",
    ),
]


@pytest.mark.parametrize(
    ("text", "registry", "repository", "tag", "enroot"), VALID, ids=[v[0][:60] for v in VALID]
)
def test_reference_parses_and_normalizes_for_enroot(
    text: str, registry: str | None, repository: str, tag: str | None, enroot: str
) -> None:
    ref = parse_reference(f"{text}@{DIGEST}")
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (
        registry,
        repository,
        tag,
        DIGEST,
    )
    assert ref.enroot_uri == f"docker://{enroot}@{DIGEST}"
    assert str(ref) == f"{text}@{DIGEST}"


def test_reference_keeps_tag_and_digest_in_the_pytorch_uri() -> None:
    ref = parse_reference(f"nvcr.io/nvidia/pytorch:24.05-py3@{DIGEST}")
    assert ref.enroot_uri == f"docker://nvcr.io#nvidia/pytorch:24.05-py3@sha256:{HEX}"


def test_reference_docker_hub_aliases_are_case_insensitive() -> None:
    ref = parse_reference(f"Docker.IO/library/ubuntu@{DIGEST}")
    assert ref.enroot_uri == f"docker://{HUB}#library/ubuntu@{DIGEST}"


# (reference, words the rule must contain)
INVALID: list[tuple[str, str]] = [
    # credentials
    (f"user@nvcr.io/nvidia/pytorch@{DIGEST}", "credentials"),
    (f"user:pass@nvcr.io/nvidia/pytorch@{DIGEST}", "credentials"),
    (f"user:pass@ubuntu@{DIGEST}", "credentials"),
    ("user@nvcr.io/nvidia/pytorch", "credentials"),
    # schemes
    (f"docker://ubuntu@{DIGEST}", "scheme"),
    (f"docker://nvcr.io#nvidia/pytorch@{DIGEST}", "scheme"),
    (f"https://nvcr.io/nvidia/pytorch@{DIGEST}", "scheme"),
    (f"oci://quay.io/a/b@{DIGEST}", "scheme"),
    # query and fragment
    (f"nvcr.io/nvidia/pytorch?tag=1@{DIGEST}", "query"),
    (f"nvcr.io/nvidia/pytorch@{DIGEST}?x=1", "query"),
    (f"nvcr.io#nvidia/pytorch@{DIGEST}", "fragment"),
    (f"nvcr.io/nvidia/pytorch@{DIGEST}#frag", "fragment"),
    # missing or wrong digests
    ("ubuntu", "digest"),
    ("ubuntu:24.04", "digest"),
    ("nvcr.io/nvidia/pytorch:24.05-py3", "digest"),
    (f"ubuntu@sha256:{HEX[:-1]}", "digest"),
    (f"ubuntu@sha256:{HEX}0", "digest"),
    (f"ubuntu@sha256:{HEX.upper()}", "digest"),
    ("ubuntu@sha256:" + "g" * 64, "digest"),
    ("ubuntu@sha512:" + "f" * 128, "digest"),
    (f"ubuntu@SHA256:{HEX}", "digest"),
    (f"ubuntu@{HEX}", "digest"),
    ("ubuntu@sha256:", "digest"),
    ("ubuntu@", "digest"),
    # uppercase and empty path components, bad separators
    (f"Ubuntu@{DIGEST}", "lowercase"),
    (f"nvcr.io/NVIDIA/pytorch@{DIGEST}", "lowercase"),
    (f"test:5000/Uppercase/lowercase:tag@{DIGEST}", "lowercase"),
    (f"nvcr.io//pytorch@{DIGEST}", "empty"),
    (f"nvcr.io/nvidia/@{DIGEST}", "empty"),
    (f"/ubuntu@{DIGEST}", "empty"),
    (f"@{DIGEST}", "empty"),
    (f":justtag@{DIGEST}", "empty"),
    (f"nvcr.io/-nvidia/pytorch@{DIGEST}", "component"),
    (f"nvcr.io/nvidia_/pytorch@{DIGEST}", "component"),
    (f"nvcr.io/a___b@{DIGEST}", "component"),
    (f"nvcr.io/a..b@{DIGEST}", "component"),
    # registries
    (f"nvcr.io:0/x@{DIGEST}", "port"),
    (f"nvcr.io:65536/x@{DIGEST}", "port"),
    (f"nvcr.io:/x@{DIGEST}", "port"),
    (f"-bad.example.org/x@{DIGEST}", "host"),
    (f"[2001:db8::1/x@{DIGEST}", "bracket"),
    (f"[not-ipv6]:5000/x@{DIGEST}", "IPv6"),
    (f"[2001:db8::1]:5000@{DIGEST}", "bracket"),
    # tags
    (f"ubuntu:@{DIGEST}", "tag"),
    (f"ubuntu:.hidden@{DIGEST}", "tag"),
    (f"ubuntu:-dash@{DIGEST}", "tag"),
    ("ubuntu:" + "t" * 129 + f"@{DIGEST}", "tag"),
    # over-long names
    ("a/" * 128 + f"a@{DIGEST}", "255"),
    ("nvcr.io/" + "a" * 256 + f"@{DIGEST}", "255"),
    ("localhost:5000/" + "a/" * 128 + f"a@{DIGEST}", "255"),
    # Docker Hub's official names are counted as the registry receives them: library/NAME
    ("a" * 248 + f"@{DIGEST}", "255"),
    ("index.docker.io/" + "a" * 248 + f"@{DIGEST}", "255"),
    ("a" * 1100 + f"@{DIGEST}", "1024"),
    # an IPv6 literal holds hexadecimal digits and colons only (no dotted IPv4 tail, no zone)
    (f"[::ffff:192.0.2.1]:5000/x@{DIGEST}", "hexadecimal digits and colons"),
    (f"[2001:db8::g]/x@{DIGEST}", "hexadecimal digits and colons"),
    (f"[]/x@{DIGEST}", "bracket"),
    (f"[:]/x@{DIGEST}", "ipv6"),
    (f"[2001:db8::1:]/x@{DIGEST}", "ipv6"),
    # whitespace and control characters
    (f"ubuntu @{DIGEST}", "whitespace"),
    (f" ubuntu@{DIGEST}", "whitespace"),
    (f"ubuntu\t@{DIGEST}", "whitespace"),
    (f"ubuntu@{DIGEST}\n", "whitespace"),
    (f"ubu\nntu@{DIGEST}", "whitespace"),
    (f"ubu\x00ntu@{DIGEST}", "control"),
    (f"ubu\x1bntu@{DIGEST}", "control"),
    (f"ubu\x7fntu@{DIGEST}", "control"),
    (f"ubuntu\u00a0@{DIGEST}", "whitespace"),
    (f"ubüntu@{DIGEST}", "ASCII"),
    ("", "empty"),
    # shell characters
    *[(f"ubu{ch}ntu@{DIGEST}", "contain") for ch in ";$`|&'\"<>(){}*!~\\%+=,^"],
    (f"ubuntu@{DIGEST};rm", "contain"),
    (f"$(id)/ubuntu@{DIGEST}", "contain"),
]


@pytest.mark.parametrize(("text", "rule_word"), INVALID, ids=[repr(v[0])[:60] for v in INVALID])
def test_reference_refuses_malformed_input_naming_the_rule(text: str, rule_word: str) -> None:
    with pytest.raises(InvalidReference) as caught:
        parse_reference(text)
    assert caught.value.field == "source"
    assert rule_word.lower() in caught.value.rule.lower()


def test_reference_refuses_credentials_even_when_the_rest_is_valid() -> None:
    with pytest.raises(InvalidReference, match="credentials"):
        parse_reference(f"alice:s3cret@ghcr.io/org/app:1@{DIGEST}")


def test_reference_error_message_does_not_echo_the_secret() -> None:
    with pytest.raises(InvalidReference) as caught:
        parse_reference(f"alice:s3cret@ghcr.io/org/app@{DIGEST}")
    assert "s3cret" not in str(caught.value)


# -- properties ---------------------------------------------------------------------------------

_alnum = st.text(alphabet=string.ascii_lowercase + string.digits, min_size=1, max_size=6)
_separator = st.sampled_from([".", "_", "__", "-", "--"])


@st.composite
def path_components(draw: st.DrawFn) -> str:
    parts = [draw(_alnum)]
    for _ in range(draw(st.integers(0, 2))):
        parts += [draw(_separator), draw(_alnum)]
    return "".join(parts)


_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?", fullmatch=True)
_domain = st.lists(_label, min_size=2, max_size=3).map(".".join)
_ipv4 = st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))
_host = st.one_of(_domain, _ipv4, st.just("localhost"))
_port = st.integers(1, 65535).map(str)
_registry = st.one_of(
    st.none(),
    st.builds(lambda h, p: h if p is None else f"{h}:{p}", _host, st.one_of(st.none(), _port)),
    st.sampled_from(["docker.io", "index.docker.io", HUB, "[::1]:5000", "[2001:db8::1]"]),
)
_tag = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}", fullmatch=True)
_hex = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)


@st.composite
def references(draw: st.DrawFn) -> str:
    registry = draw(_registry)
    path = "/".join(draw(st.lists(path_components(), min_size=1, max_size=3)))
    if registry is None and "." in path.split("/")[0] and "/" in path:
        registry = "docker.io"  # a first component with '.' would read as a host
    tag = draw(st.one_of(st.none(), _tag))
    prefix = f"{registry}/" if registry else ""
    suffix = f":{tag}" if tag else ""
    return f"{prefix}{path}{suffix}@sha256:{draw(_hex)}"


ENROOT_URI = re.compile(
    r"docker://(?P<registry>[^#/@]+)#(?P<path>[a-z0-9._/-]+)(:(?P<tag>[A-Za-z0-9_.-]+))?"
    r"@sha256:[0-9a-f]{64}"
)


@given(references())
def test_reference_generated_from_the_grammar_round_trips(text: str) -> None:
    ref = parse_reference(text)
    assert str(ref) == text
    assert parse_reference(str(ref)) == ref
    match = ENROOT_URI.fullmatch(ref.enroot_uri)
    assert match, ref.enroot_uri
    assert match["tag"] == ref.tag
    assert ref.enroot_uri.endswith(ref.digest)
    if ref.registry is None or ref.registry.lower() in {"docker.io", "index.docker.io", HUB}:
        assert match["registry"] == HUB
        assert "/" in match["path"]
    else:
        assert match["registry"] == ref.registry
        assert match["path"] == ref.repository


FORBIDDEN = " \t\n\r\x00\x1b\x7f;$`|&'\"<>(){}*!~\\%+=,^?#\u00a0\u2028é"


@given(
    references(),
    st.integers(min_value=0, max_value=200),
    st.text(alphabet=FORBIDDEN, min_size=1, max_size=3),
)
def test_reference_with_a_forbidden_character_never_parses(
    text: str, position: int, inserted: str
) -> None:
    position %= len(text) + 1
    with pytest.raises(InvalidReference) as caught:
        parse_reference(text[:position] + inserted + text[position:])
    assert caught.value.field == "source"


@given(st.text(max_size=80))
def test_reference_parser_never_raises_anything_but_invalid_reference(text: str) -> None:
    try:
        ref = parse_reference(text)
    except InvalidReference as error:
        assert error.field == "source"
    else:
        assert ref.digest.startswith("sha256:")
        assert parse_reference(str(ref)) == ref


# -- the length limit and IPv6 literals, as distribution/reference has them --------------------


@given(_host, st.one_of(st.none(), _port), st.integers(1, 255))
def test_reference_path_limit_never_counts_the_host(
    host: str, port: str | None, length: int
) -> None:
    registry = host if port is None else f"{host}:{port}"
    if registry == "localhost":
        registry = "localhost:5000"
    path = "a" * length
    ref = parse_reference(f"{registry}/{path}@{DIGEST}")
    assert (ref.registry, ref.repository) == (registry, path)
    with pytest.raises(InvalidReference, match="255"):
        parse_reference(f"{registry}/{path}{'b' * (256 - length)}@{DIGEST}")


@given(st.lists(path_components(), min_size=1, max_size=40).map("/".join))
def test_reference_path_limit_is_255_characters_of_the_registry_path(path: str) -> None:
    text = f"ghcr.io/{path}@{DIGEST}"
    if len(path) <= 255:
        assert parse_reference(text).repository == path
    else:
        with pytest.raises(InvalidReference, match="255"):
            parse_reference(text)


_ipv6_int = st.integers(0, 2**128 - 1)


@given(_ipv6_int, st.booleans(), st.booleans())
def test_reference_accepts_every_ipv6_address_in_hexadecimal_and_colons(
    number: int, compressed: bool, upper: bool
) -> None:
    address = ipaddress.IPv6Address(number)
    text = address.compressed if compressed and "." not in address.compressed else address.exploded
    text = text.upper() if upper else text
    ref = parse_reference(f"[{text}]:5000/repo@{DIGEST}")
    assert ref.registry == f"[{text}]:5000"
    assert ref.enroot_uri.startswith(f"docker://[{text}]:5000#repo@")


@given(_ipv6_int, st.sampled_from(["g", ".", ".1", "%eth0", "-", "_", "z"]))
def test_reference_refuses_any_other_character_in_an_ipv6_literal(number: int, extra: str) -> None:
    address = ipaddress.IPv6Address(number).exploded
    with pytest.raises(InvalidReference) as caught:
        parse_reference(f"[{address}{extra}]/repo@{DIGEST}")
    assert caught.value.field == "source"


# -- the Enroot 3.x form: the digest in tag position (docs/enroot.md) --------------------------

ENROOT_3_URI = re.compile(
    r"docker://(?P<registry>[^#]+)#(?P<image>[a-z0-9/._-]+):(?P<tag>[A-Za-z0-9._:-]+)"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"nvcr.io/nvidia/pytorch:24.05-py3@{DIGEST}", f"docker://nvcr.io#nvidia/pytorch:{DIGEST}"),
        (f"ubuntu@{DIGEST}", f"docker://{HUB}#library/ubuntu:{DIGEST}"),
        (f"docker.io/team/app:1@{DIGEST}", f"docker://{HUB}#team/app:{DIGEST}"),
        (f"127.0.0.1:5443/a/b:1@{DIGEST}", f"docker://127.0.0.1:5443#a/b:{DIGEST}"),
    ],
)
def test_reference_enroot_3_form_puts_the_digest_in_tag_position(text: str, expected: str) -> None:
    assert parse_reference(text).enroot_uri_tag_digest == expected


@given(references())
def test_reference_enroot_3_form_reads_back_as_registry_image_and_digest(text: str) -> None:
    ref = parse_reference(text)
    match = ENROOT_3_URI.fullmatch(ref.enroot_uri_tag_digest)
    assert match, ref.enroot_uri_tag_digest
    assert "@" not in ref.enroot_uri_tag_digest
    assert (match["registry"], match["image"], match["tag"]) == (
        ref.enroot_registry,
        ref.enroot_repository,
        ref.digest,
    )
