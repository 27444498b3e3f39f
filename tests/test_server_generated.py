"""The server's promises under generated input: any JSON value in any field of the four
request bodies (OpenAI's three, Anthropic's Messages) is answered, never with a 500, and leaves nothing reserved; and whatever
fault strikes after a reservation (an exception before or after the request left, in the
provider's library or in the answer's making), nothing stays in flight.

The app is the one `policy-router serve` runs, called in this process through Starlette's
test client (hypothesis makes hundreds of requests; a process per example would take
minutes), with FakeProvider as every provider over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy_router.drive.seam.openai_params import params
from policy_router.testing import FakeProvider

from .conftest import KEY_PREFIX
from .test_server import SOLO, policy

PATHS = {
    "chat": "/v1/chat/completions", "embedding": "/v1/embeddings", "responses": "/v1/responses",
    "messages": "/v1/messages",
}
BASES: dict[str, dict[str, Any]] = {
    "chat": {"model": "smart", "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 5},
    "embedding": {"model": "emb", "input": "hello"},
    "responses": {"model": "smart", "input": "Say hello.", "max_output_tokens": 5},
    "messages": {"model": "smart", "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 5},
}
AUTH = {"Authorization": f"Bearer {SOLO}"}

SCALARS = (
    st.none() | st.booleans() | st.integers() | st.integers(min_value=10**300, max_value=10**400)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@pytest.fixture(scope="module")
def http(_fake_server: FakeProvider) -> Iterator[Any]:
    import os

    from starlette.testclient import TestClient

    from policy_router.server import create_app

    os.environ.setdefault("PROVIDER_KEY", f"{KEY_PREFIX}provider")
    os.environ.setdefault("TEAM_KEY", "sk-team-key-1")
    os.environ.setdefault("LOCAL_KEY", "sk-local-key-3")
    with TestClient(create_app(policy(_fake_server, breaker=False)), raise_server_exceptions=False) as client:
        yield client


def held(http: Any) -> dict[str, Any]:
    found: dict[str, Any] = http.get("/health", headers=AUTH).json()["key"]
    return found


def fields_of(endpoint: str) -> list[str]:
    return [*sorted(params(endpoint).names - {"stream"}), "stream", "policy_router"]


@pytest.mark.parametrize("endpoint", sorted(PATHS))
def test_any_json_value_in_any_field_is_answered_without_a_500_and_holds_nothing(
    fake: FakeProvider, http: Any, endpoint: str
) -> None:
    """Every field of the body, in turn given any JSON value (nested, huge, empty, of the
    wrong kind), or the `policy_router` field any of its own: a 2xx or a 4xx naming what
    is wrong, and after it no reservation held and no call in flight."""

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(field=st.sampled_from(fields_of(endpoint)), value=JSON | st.dictionaries(st.sampled_from(["on_device", "deadline", "needs"]), JSON, max_size=2))
    def one(field: str, value: Any) -> None:
        body = {**BASES[endpoint], field: value}
        reply = http.post(PATHS[endpoint], content=json.dumps(body), headers={**AUTH, "content-type": "application/json"})
        assert reply.status_code < 500, (field, value, reply.status_code, reply.text[:300])
        if reply.status_code >= 400:
            assert reply.json()["error"]["message"]
        account = held(http)
        assert account["in_flight"] == 0 and account["reserved"] == "0.000000", (field, value)

    one()


FAULTS = ["before", "after", "after-stream", "in-the-answer", "cancelled-after"]


@pytest.mark.parametrize("endpoint", sorted(PATHS))
def test_no_fault_after_a_reservation_keeps_it(fake: FakeProvider, http: Any, endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception of any kind from the provider's library, before the request left or
    after its answer came, or in the server's making of the answer: the reservation is
    settled (charged once the request had left, else released), none stays in flight, and
    spent never passes the cap."""
    import litellm

    from policy_router.server import answers

    kinds = [ValueError("bad"), KeyError("k"), RuntimeError("boom"), AttributeError("x"), TypeError("t")]
    function = {"chat": "acompletion", "embedding": "aembedding", "responses": "aresponses", "messages": "anthropic_messages"}[endpoint]
    real = getattr(litellm, function)
    from policy_router.server import anthropic

    real_shaped = anthropic.shaped if endpoint == "messages" else answers.shaped

    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(where=st.sampled_from(FAULTS), error=st.sampled_from(kinds), stream=st.booleans())
    def one(where: str, error: Exception, stream: bool) -> None:
        async def faulty(**kwargs: Any) -> Any:
            if where == "before":
                raise error
            answer = await real(**kwargs)
            if where in ("after", "after-stream"):
                raise error
            if where == "cancelled-after":
                import asyncio

                raise asyncio.CancelledError
            return answer

        def shaped(routed: Any) -> Any:
            if where == "in-the-answer":
                raise error
            return real_shaped(routed)

        monkeypatch.setattr(litellm, function, faulty)
        monkeypatch.setattr(answers, "shaped", shaped)
        from policy_router.server import app as app_module

        monkeypatch.setattr(app_module, "shaped", shaped)
        monkeypatch.setattr(app_module, "message_shaped", shaped)
        body = {**BASES[endpoint], **({"stream": True} if stream and endpoint != "embedding" else {})}
        before = held(http)
        http.post(PATHS[endpoint], json=body, headers=AUTH)
        after = held(http)
        assert after["in_flight"] == 0 and after["reserved"] == "0.000000", (where, error, stream)
        assert Decimal(after["spent"]) <= Decimal(after["cap"])
        assert Decimal(after["spent"]) >= Decimal(before["spent"])

    one()
