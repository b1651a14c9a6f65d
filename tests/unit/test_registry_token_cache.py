"""The tokens one ``HttpRegistry`` keeps are shared by the imports of every thread: two that
were both refused the same cached token each drop it without error, and a new token another
import has put in its place stays."""

from __future__ import annotations

from types import SimpleNamespace

from slurm_image.adapters.oci_registry.auth import Authentication, Token, TokenCache, TokenKey
from slurm_image.adapters.oci_registry.conversation import Origin

ORIGIN = Origin("https", "registry.example", 443)


def authentication(cache: TokenCache) -> Authentication:
    conversation = SimpleNamespace(
        request=SimpleNamespace(repository="team/app", credentials=None),
        registry="registry.example",
        origin=ORIGIN,
        monotonic=lambda: 100.0,
        secrets=set(),
    )
    return Authentication(conversation, cache)  # type: ignore[arg-type]


def cache_with(token: Token) -> tuple[TokenCache, TokenKey]:
    key = TokenKey(
        ORIGIN, "https://auth.example/token", "registry", "repository:team/app:pull", None
    )  # type: ignore[arg-type]
    cache = TokenCache()
    cache.tokens[key] = token
    cache.realms[(ORIGIN, "team/app", None)] = key
    return cache, key


def test_two_imports_refused_one_token_both_drop_it() -> None:
    cache, key = cache_with(Token("old", expires_at=200.0, with_credentials=False))
    first, second = authentication(cache), authentication(cache)
    assert first.cached() == second.cached() == "Bearer old"
    first.drop_cached()
    second.drop_cached()
    assert key not in cache.tokens


def test_a_token_put_in_place_of_the_refused_one_stays() -> None:
    cache, key = cache_with(Token("old", expires_at=200.0, with_credentials=False))
    late = authentication(cache)
    assert late.cached() == "Bearer old"
    fresh = Token("new", expires_at=300.0, with_credentials=False)
    cache.tokens[key] = fresh  # another import's challenge, answered meanwhile
    late.drop_cached()
    assert cache.tokens[key] is fresh
