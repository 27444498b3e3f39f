"""Responses continuity: a call with `previous_response_id` goes to the route that made that
response (remembered in the store, so across processes with Redis), never off the device
when the first was on it, and the journey says so when that route cannot serve.

FakeProvider, like OpenAI, answers 400 `previous_response_not_found` when a model is asked
to continue a response it did not make: a call routed elsewhere would fail, not pass."""

from __future__ import annotations

import asyncio
from typing import Any

import litellm
import pytest

from policy_router import (
    AllRestingError,
    Breaker,
    Check,
    ConfigError,
    NoRouteError,
    Order,
    RedisStore,
    Route,
    Router,
)
from policy_router.testing import Fail, FakeProvider

from ._redis import RedisServer, free_port

CAPS = {"responses": True, "streaming": True}


def _route(fake: FakeProvider, model: str, **kw: Any) -> Route:
    kw.setdefault("group", "g")
    return Route(f"openai/{model}", api_base=fake.base_url, api_key=f"sk-cont-{model}", capabilities=CAPS, **kw)


def _continuity_skips(journey: Any) -> dict[str, str]:
    return {s.route: s.reason for s in journey.skips if s.check is Check.CONTINUITY}


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_continuation_goes_to_the_route_that_made_the_response(fake: FakeProvider, driver: str) -> None:
    router = Router([_route(fake, "a"), _route(fake, "b")], order=Order.ROUND_ROBIN)

    def ask(**kw: Any) -> Any:
        if driver == "async":
            return asyncio.run(router.aresponses(model="g", **kw))
        return router.responses(model="g", **kw)

    first = ask(input="hello")
    assert first._hidden_params["policy_router"].answered_by == "openai/a"
    # Round robin would start at b now; the conversation lives at a.
    second = ask(input="and then?", previous_response_id=first.id)
    journey = second._hidden_params["policy_router"]
    assert journey.answered_by == "openai/a" and fake.requests("b") == 0
    assert "made by openai/a" in _continuity_skips(journey)["openai/b"]
    third = ask(input="go on", previous_response_id=second.id)  # a chain of turns
    assert third._hidden_params["policy_router"].answered_by == "openai/a"
    # A call that continues nothing takes its turn as before.
    assert ask(input="new topic")._hidden_params["policy_router"].answered_by == "openai/b"


def test_a_streamed_answer_is_continued_where_it_was_made(fake: FakeProvider) -> None:
    """The stream's id (its `response.created` event) is remembered at its clean end."""
    # Models LiteLLM streams natively on the Responses API.
    router = Router([_route(fake, "gpt-4o-mini"), _route(fake, "gpt-4o")], order=Order.ROUND_ROBIN)
    stream = router.responses(model="g", input="hello", stream=True)
    events = list(stream)  # read to its end: the id is remembered at a clean end
    made = next(e.response.id for e in events if str(getattr(e, "type", "")).endswith("CREATED"))
    assert stream.journey.answered_by == "openai/gpt-4o-mini"
    then = router.responses(model="g", input="more", previous_response_id=made)
    assert then._hidden_params["policy_router"].answered_by == "openai/gpt-4o-mini"
    assert fake.requests("gpt-4o") == 0


def test_without_the_router_a_continuation_sent_elsewhere_fails(fake: FakeProvider) -> None:
    """Why pinning matters: the other deployment does not hold the conversation."""
    first = litellm.responses(model="openai/a", input="hi", api_base=fake.base_url, api_key="sk-x")
    with pytest.raises(litellm.BadRequestError, match="not found"):
        litellm.responses(
            model="openai/b", input="more", previous_response_id=first.id,
            api_base=fake.base_url, api_key="sk-x",
        )


def test_an_on_device_conversation_never_moves_to_a_vendor(fake: FakeProvider) -> None:
    """The route that made it rests: nothing else is tried, and the journey says why."""
    router = Router(
        [_route(fake, "local", reach="on_device"), _route(fake, "vendor", reach="vendor")],
        breaker=Breaker(failures=1, cooldown=60),
    )
    first = router.responses(model="g", input="private notes")
    fake.script("local", Fail(503))
    with pytest.raises(litellm.ServiceUnavailableError):  # the local route failed; vendor not asked
        router.responses(model="g", input="more", previous_response_id=first.id)
    with pytest.raises(AllRestingError) as resting:
        router.responses(model="g", input="more", previous_response_id=first.id)
    journey = resting.value.journey
    why = _continuity_skips(journey)["openai/vendor"]
    assert "made by openai/local (on the device)" in why
    assert any(s.check is Check.BREAKER and s.route == "openai/local" for s in journey.skips)
    assert fake.requests("vendor") == 0


def test_a_continuation_whose_route_is_gone_sends_nothing_and_says_so(fake: FakeProvider) -> None:
    router = Router([_route(fake, "a", id="deploy-a"), _route(fake, "b")])
    first = router.responses(model="g", input="hi")
    router.reconfigure(routes=[_route(fake, "b"), _route(fake, "c")])
    with pytest.raises(NoRouteError) as refused:
        router.responses(model="g", input="more", previous_response_id=first.id)
    skips = _continuity_skips(refused.value.journey)
    assert set(skips) == {"openai/b", "openai/c"}
    assert "made by route id 'deploy-a'" in skips["openai/b"] and "cannot serve" in skips["openai/b"]
    assert fake.requests("b") == 0 and fake.requests("c") == 0


def test_an_id_this_router_did_not_make_is_routed_as_any_call(fake: FakeProvider) -> None:
    made_elsewhere = litellm.responses(
        model="openai/b", input="hi", api_base=fake.base_url, api_key="sk-x"
    ).id
    router = Router([_route(fake, "a"), _route(fake, "b")])
    with pytest.raises(litellm.BadRequestError) as failed:  # a, first as listed, holds none
        router.responses(model="g", input="more", previous_response_id=made_elsewhere)
    assert fake.requests("a") == 1
    assert not _continuity_skips(failed.value.journey)  # type: ignore[attr-defined]


def test_a_bad_previous_response_id_is_refused_before_sending(fake: FakeProvider) -> None:
    router = Router([_route(fake, "a")])
    for bad in ("", "  ", 12):
        with pytest.raises(ConfigError, match="previous_response_id must be the id"):
            router.responses(model="g", input="x", previous_response_id=bad)
    assert fake.requests() == 0


def test_continuity_holds_across_processes_sharing_redis(
    fake: FakeProvider, redis_server: RedisServer
) -> None:
    """Two routers with their own connections (as two processes have): the second
    continues, on the first's route, a response the first returned."""

    def router() -> Router:
        return Router(
            [_route(fake, "a"), _route(fake, "b")],
            order=Order.ROUND_ROBIN,
            store=RedisStore(redis_server.url, namespace="policy_router:continuity"),
        )

    one, two = router(), router()
    try:
        first = one.responses(model="g", input="hello")
        assert first._hidden_params["policy_router"].answered_by == "openai/a"
        # `two` has its own turn (it would start at a) and no memory of its own: move its
        # turn so a pinned call is told apart from a lucky one.
        assert two.responses(model="g", input="x")._hidden_params["policy_router"].answered_by == "openai/a"
        then = two.responses(model="g", input="more", previous_response_id=first.id)
        assert then._hidden_params["policy_router"].answered_by == "openai/a"
        assert fake.requests("b") == 0
    finally:
        RedisStore(redis_server.url, namespace="policy_router:continuity").clear()


def test_a_store_that_cannot_say_keeps_the_call_on_the_device(fake: FakeProvider) -> None:
    """Redis is down: which route made the response is unknown, so vendors are not asked."""
    dead = RedisStore(f"redis://127.0.0.1:{free_port()}/0", timeout=0.2)
    router = Router(
        [_route(fake, "vendor", reach="vendor"), _route(fake, "local", reach="on_device")],
        store=dead,
    )
    with pytest.raises(litellm.BadRequestError):  # local does not hold it; it was asked
        router.responses(model="g", input="more", previous_response_id="resp_somewhere")
    assert fake.requests("vendor") == 0 and fake.requests("local") == 1
