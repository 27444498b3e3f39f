"""A provider that closes idle connections (uvicorn does after `timeout_keep_alive`, 5 s by
default; vLLM and many local servers run on it) while LiteLLM's HTTP clients keep theirs
longer: a request written as the server closes one fails before any answer. Such a failure
says nothing of the route: it is asked again on a fresh connection, once, and the breaker
is not told.

The provider here closes idle connections after 0.3 s, so calls spaced around that time
cross the close often within seconds (at uvicorn's 5 s, the same race takes minutes)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from policy_router import Route, Router

IDLE = 0.3
GAPS = [round(IDLE - 0.010 + i * 0.0015, 4) for i in range(16)]  # around the idle time


@pytest.fixture(scope="module")
def closing_provider() -> Iterator[str]:
    """An OpenAI-compatible chat endpoint under uvicorn, closing idle connections at IDLE."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route as Path

    async def chat(request: Request) -> JSONResponse:
        await request.json()
        return JSONResponse({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        })

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(
        Starlette(routes=[Path("/v1/chat/completions", chat, methods=["POST"])]),
        host="127.0.0.1", port=port, log_level="error", timeout_keep_alive=IDLE,  # type: ignore[arg-type]
    ))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(timeout=10)


def _router(base: str) -> Router:
    caps = {"tools": True, "streaming": True}
    return Router([
        Route("openai/m", group="g", api_base=base, api_key="sk-test-secret-ka", capabilities=caps),
        Route("openai/m", name="other", group="g", api_base=base, api_key="sk-test-secret-ka", capabilities=caps),
    ])


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_calls_spaced_around_the_servers_idle_time_never_fail_over_or_rest_the_route(closing_provider: str, kind: str) -> None:
    """Every call is answered by the first route (a stale connection is asked again on a
    fresh one, never failed over), and the route never rests nor counts a failure."""
    router = _router(closing_provider)
    answered: list[str] = []
    messages = [{"role": "user", "content": "hi"}]

    def sync_calls() -> None:
        for gap in GAPS:
            time.sleep(gap)
            answered.append(router.route(model="g", messages=messages).route.name)

    async def async_calls() -> None:
        for gap in GAPS:
            await asyncio.sleep(gap)
            answered.append((await router.aroute(model="g", messages=messages)).route.name)

    sync_calls() if kind == "sync" else asyncio.run(async_calls())
    assert answered == ["openai/m"] * len(GAPS)
    health = router.health()["openai/m"]
    assert health.failures == 0 and health.opened == 0
    router.close()


def test_a_stale_connection_is_asked_again_once_then_counts_as_any_connection_fault() -> None:
    """The decision core (pure, no network): the first reset of a route in a request asks it
    again at once, the breaker not told; a second reset of it is a connection fault like
    any other: the next route, and the breaker told."""
    from policy_router import Breaker, ManualClock, Requirements
    from policy_router.core.plan import Plan
    from policy_router.ground.capability import Capability
    from policy_router.ground.outcome import Fault, FaultKind
    from policy_router.policies.breaker import HealthBook
    from policy_router.policies.candidate import Candidate
    from policy_router.policies.capabilities import resolve
    from policy_router.state.memory import InMemoryStore

    from .conftest import Stepped

    def cand(name: str) -> Candidate:
        route = Route(f"openai/{name}", group="g", reach="on_device", api_key=f"key-of-{name}")
        return Candidate(route=route, capabilities=resolve(route.model, None, False, dict.fromkeys(Capability, True)))

    clock, store = ManualClock(), InMemoryStore()
    health = HealthBook(Breaker(failures=2), store.bind("r", clock, lambda _: None), lambda _: None)
    plan = Stepped(Plan("g", [cand("a"), cand("b")], Requirements(), clock=clock, health=health))
    reset = Fault(FaultKind.CONNECTION, 500, "Connection reset by peer", stale=True)
    first = plan.next()
    plan.failed(first, reset)
    again = plan.next()
    assert again.route.name == "openai/a" and "fresh connection" in plan.journey.attempts[0].then
    plan.failed(again, reset)
    last = plan.next()
    assert last.route.name == "openai/b"
    assert store.health(first.route.id).failures == 1  # the second reset only
