"""The router end to end against FakeProvider over real HTTP: every fault, every position,
every driver."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import litellm
import pytest

from policy_router import (
    Breaker,
    ConfigError,
    Journey,
    NoRouteError,
    Reach,
    RefusedError,
    Route,
    Routed,
    Router,
)
from policy_router.testing import (
    Cut,
    Drop,
    Fail,
    FakeProvider,
    Hang,
    NoFinish,
    Refuse,
    Reply,
    Step,
)

from .conftest import KEY_PREFIX, MESSAGES, fake_route

NAMES = ("first", "middle", "last")
DRIVERS = ("sync", "async", "stream", "astream")


def three(fake: FakeProvider, **kw: Any) -> Router:
    return Router([fake_route(fake, n, **kw) for n in NAMES])


def run(router: Router, driver: str, **kw: Any) -> tuple[Routed[Any], str]:
    """Route one request through `driver`, returning the Routed and the full text."""
    kw.setdefault("messages", MESSAGES)
    kw.setdefault("model", "g")
    if driver == "sync":
        routed = router.route(**kw)
        return routed, routed.response.choices[0].message.content
    if driver == "async":
        routed = asyncio.run(router.aroute(**kw))
        return routed, routed.response.choices[0].message.content
    if driver == "stream":
        routed = router.route(stream=True, **kw)
        return routed, "".join(c.choices[0].delta.content or "" for c in routed.response)

    async def consume() -> tuple[Routed[Any], str]:
        routed = await router.aroute(stream=True, **kw)
        text = "".join([c.choices[0].delta.content or "" async for c in routed.response])
        return routed, text

    return asyncio.run(consume())


# fault step, the exception class a caller sees if it is the last, whether it falls through
FAULTS: dict[str, tuple[Step, type[BaseException], bool]] = {
    "500": (Fail(500), litellm.InternalServerError, True),
    "502": (Fail(502), litellm.BadGatewayError, True),
    "503": (Fail(503), litellm.ServiceUnavailableError, True),
    "429": (Fail(429, retry_after=7), litellm.RateLimitError, True),
    "timeout": (Hang(3), litellm.Timeout, True),
    "drop": (Drop(), litellm.InternalServerError, True),
    "cut-before-first-chunk": (Cut(after=0), litellm.ServiceUnavailableError, True),
    "401": (Fail(401), litellm.AuthenticationError, True),
    "403": (Fail(403), litellm.APIError, True),
    "404": (Fail(404), litellm.NotFoundError, True),
    "400": (Fail(400), litellm.BadRequestError, False),
    "422": (Fail(422), litellm.BadRequestError, False),
    # A prompt too long for one route's window moves on to a route whose window is larger
    # or unknown (these routes declare none).
    "context-window": (
        Fail(400, "This model's maximum context length is 8 tokens."),
        litellm.ContextWindowExceededError,
        True,
    ),
    "refusal": (Refuse(), RefusedError, False),
}


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("position", range(3), ids=NAMES)
@pytest.mark.parametrize("fault", FAULTS)
def test_fault_at_each_position(fake: FakeProvider, fault: str, position: int, driver: str) -> None:
    """Routes before the faulty one fail with 503; what follows depends on the fault."""
    step, error, falls_through = FAULTS[fault]
    if fault == "cut-before-first-chunk" and not driver.endswith("stream"):
        # A plain request has no chunks: the same fault is a dropped connection.
        step, error = Drop(), litellm.InternalServerError
    for name in NAMES[:position]:
        fake.script(name, Fail(503))
    fake.script(NAMES[position], step)
    router = three(fake)
    # Long enough for a healthy route's stream on a loaded two-core machine (0.5 s cut
    # the route after the hung one once), far short of the hang it cuts.
    timeout = {"timeout": 1.5} if fault == "timeout" else {}
    answers = falls_through and position < 2
    if answers:
        routed, text = run(router, driver, **timeout)
        assert routed.route.name == f"openai/{NAMES[position + 1]}"
        assert text == "Hello from FakeProvider."
        journey = routed.journey
    else:
        with pytest.raises(error) as caught:
            run(router, driver, **timeout)
        journey = caught.value.journey  # type: ignore[attr-defined]
        assert journey.answered_by is None
    sent = [fake.requests(n) for n in NAMES]
    expected = [1] * (position + 1) + ([1] if answers else []) + [0] * 3
    assert sent == expected[:3], str(journey)
    assert len(journey.attempts) == sum(sent)
    assert [a.route for a in journey.attempts] == [
        f"openai/{n}" for n, c in zip(NAMES, sent, strict=True) if c
    ]


@pytest.mark.parametrize("driver", DRIVERS)
def test_last_exception_keeps_its_class_and_carries_the_journey(
    fake: FakeProvider, driver: str
) -> None:
    """An exhausted router whose last failure was a 429 is caught by `except RateLimitError`."""
    fake.script("first", Fail(503))
    fake.script("middle", Fail(401))
    fake.script("last", Fail(429, retry_after=3))
    try:
        run(three(fake), driver)
    except litellm.RateLimitError as exc:
        journey = Journey.of(exc)  # exc.journey, typed
        assert journey is not None and journey is exc.journey  # type: ignore[attr-defined]
        assert [a.outcome for a in journey.attempts] == ["server_error", "access", "rate_limited"]
        assert [a.status for a in journey.attempts] == [503, 401, 429]
        assert any("openai/middle" in note for note in exc.__notes__)
    else:
        pytest.fail("the router did not raise")


def test_journey_of_reads_the_routers_own_errors_and_nothing_else(fake: FakeProvider) -> None:
    """`Journey.of` gives the journey of an error the router raised, its own errors included,
    and None for an exception it never touched (or one whose `journey` is something else)."""
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    router = Router([fake_route(fake, "first", capabilities={"chat": True, "tools": False})])
    with pytest.raises(NoRouteError) as caught:
        router.completion(model="g", messages=MESSAGES, tools=[tool])
    journey = Journey.of(caught.value)
    assert journey is not None and journey.skips[0].route == "openai/first"
    assert fake.requests("first") == 0
    assert Journey.of(ValueError("not ours")) is None
    stray = RuntimeError("journey set by someone else")
    stray.journey = "a string"  # type: ignore[attr-defined]
    assert Journey.of(stray) is None


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("fault", FAULTS)
def test_on_device_floor_never_reaches_a_vendor(
    fake: FakeProvider, fault: str, driver: str
) -> None:
    """Under on_device=True vendor routes get no request whatever the on-device route does."""
    step, error, _ = FAULTS[fault]
    if fault == "cut-before-first-chunk" and not driver.endswith("stream"):
        step, error = Drop(), litellm.InternalServerError
    router = Router(
        [
            fake_route(fake, "vendor-a", reach=Reach.VENDOR),
            fake_route(fake, "local"),
            fake_route(fake, "vendor-b", reach="vendor"),
        ]
    )
    fake.script("local", step)
    timeout = {"timeout": 0.5} if fault == "timeout" else {}
    with pytest.raises(error) as caught:
        run(router, driver, on_device=True, **timeout)
    assert fake.requests("vendor-a") == fake.requests("vendor-b") == 0
    assert fake.requests("local") == 1
    journey = caught.value.journey  # type: ignore[attr-defined]
    assert [(s.route, s.check.value) for s in journey.skips] == [
        ("openai/vendor-a", "floor"),
        ("openai/vendor-b", "floor"),
    ]


def test_floor_with_only_vendor_routes_sends_nothing(fake: FakeProvider) -> None:
    """A floor no route can meet is a NoRouteError naming each route, with nothing sent."""
    router = Router(
        [fake_route(fake, "v1", reach="vendor"), fake_route(fake, "v2", reach="vendor")]
    )
    with pytest.raises(NoRouteError, match="on-device only") as caught:
        router.completion(model="g", messages=MESSAGES, on_device=True)
    assert fake.requests() == 0
    assert caught.value.journey is not None
    assert len(caught.value.journey.skips) == 2


@pytest.mark.parametrize("driver", ["stream", "astream"])
@pytest.mark.parametrize("fault", [Cut(after=3), NoFinish()], ids=["cut", "no-finish"])
def test_stream_failure_after_first_chunk_is_raised_inside(
    fake: FakeProvider, fault: Step, driver: str
) -> None:
    """After a chunk was seen the route is not replaced: the failure surfaces in the stream."""
    fake.script("first", fault)
    router = three(fake)
    with pytest.raises(litellm.ServiceUnavailableError) as caught:
        run(router, driver)
    assert fake.requests("middle") == 0
    journey = caught.value.journey  # type: ignore[attr-defined]
    assert [(a.route, a.outcome) for a in journey.attempts] == [("openai/first", "stream_cut")]
    assert journey.answered_by is None


def test_stream_keeps_the_text_received_before_a_cut(fake: FakeProvider) -> None:
    """The text that arrived before a cut stays readable on the stream."""
    fake.script("first", Cut(after=3, reply=Reply("alpha beta gamma delta")))
    stream = three(fake).completion(model="g", messages=MESSAGES, stream=True)
    seen = []
    with pytest.raises(litellm.ServiceUnavailableError):
        for chunk in stream:
            seen.append(chunk.choices[0].delta.content or "")
    assert stream.text == "".join(seen) == "alpha beta"


def test_response_is_litellm_model_response_with_journey(fake: FakeProvider) -> None:
    """A routed response is LiteLLM's own ModelResponse, with the journey in _hidden_params."""
    fake.script("first", Fail(500))
    response = three(fake).completion(model="g", messages=MESSAGES)
    assert isinstance(response, litellm.ModelResponse)
    journey = response._hidden_params["policy_router"]
    assert journey.answered_by == "openai/middle"
    assert str(journey).startswith(
        "Request to group 'g' (needs nothing special): tried openai/first"
    )


def test_tool_call_round_trips_and_skips_routes_without_tools(fake: FakeProvider) -> None:
    """A request with tools lands only on a route that can do tools."""
    fake.script(
        "tooly", Reply("", tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}])
    )
    router = Router(
        [fake_route(fake, "plain", capabilities={"streaming": True}), fake_route(fake, "tooly")]
    )
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    routed = router.route(model="g", messages=MESSAGES, tools=tools)
    call = routed.response.choices[0].message.tool_calls[0]
    assert (call.function.name, call.function.arguments) == ("get_weather", '{"city": "Oslo"}')
    assert fake.requests("plain") == 0
    assert routed.journey.skips[0].reason == "cannot do tools"


def test_policy_kwargs_never_reach_the_provider(fake: FakeProvider) -> None:
    """on_device and needs are taken out before LiteLLM sees the call."""
    router = Router([fake_route(fake, "local")])
    router.completion(model="g", messages=MESSAGES, on_device=True, needs={"tools"}, max_tokens=5)
    body = fake.bodies("local")[0]
    assert "on_device" not in body and "needs" not in body
    assert body["max_tokens"] == 5


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_metadata_dict_reused_for_every_call_is_left_as_passed(
    fake: FakeProvider, driver: str
) -> None:
    """LiteLLM writes into the metadata dict it is given (the answer's hidden params, the
    journey among them, and timing windows); the router gives it a copy, so the caller's
    dict stays as passed, and a second call sends nothing of the first."""
    router = Router([fake_route(fake, "a")])
    metadata = {"team": "search"}
    for _ in range(2):
        if driver == "sync":
            response = router.completion(model="g", messages=MESSAGES, metadata=metadata)
        else:
            response = asyncio.run(router.acompletion(model="g", messages=MESSAGES, metadata=metadata))
        assert response._hidden_params["policy_router"].answered_by == "openai/a"
    time.sleep(0.2)  # LiteLLM's success logging runs on its own thread after the return
    assert metadata == {"team": "search"}


def test_one_group_is_the_default_and_a_model_string_reaches_its_route(fake: FakeProvider) -> None:
    """model= may be omitted with one group, and a route's model string reaches that route."""
    router = three(fake)
    assert router.route(messages=MESSAGES).route.name == "openai/first"
    assert router.route(model="openai/last", messages=MESSAGES).route.name == "openai/last"
    with pytest.raises(NoRouteError, match=r"groups: \['g'\]"):
        router.completion(model="nope", messages=MESSAGES)
    assert fake.requests() == 2


def test_unknown_model_without_declaration_is_unusable(fake: FakeProvider) -> None:
    """A model LiteLLM does not know, on a route declaring nothing, is never sent a request."""
    unknown = Route("openai/my-own-model", group="g", api_base=fake.base_url, api_key="sk-x-1234")
    router = Router([unknown, fake_route(fake, "known")])
    assert list(router.unusable()) == ["openai/my-own-model"]
    assert "declare what it can do" in router.unusable()["openai/my-own-model"]
    routed = router.route(model="g", messages=MESSAGES)
    assert routed.journey.skips[0].reason == "unknown model"
    assert fake.requests("my-own-model") == 0


def test_explain_sends_nothing_and_gives_every_verdict(fake: FakeProvider) -> None:
    """explain() lists a verdict for every route and sends no request."""
    router = Router(
        [
            fake_route(fake, "vendor", reach="vendor"),
            fake_route(fake, "notools", capabilities={"streaming": True}),
            fake_route(fake, "local"),
        ]
    )
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    explanation = router.explain(model="g", messages=MESSAGES, tools=tools, on_device=True)
    assert [(v.route, v.position, v.check) for v in explanation.verdicts] == [
        ("openai/local", 1, None),
        ("openai/vendor", None, "floor"),
        ("openai/notools", None, "requirements"),
    ]
    assert "skip (requirements)    cannot do tools" in str(explanation)
    assert fake.requests() == 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"messages": "hello"}, "messages must be a non-empty list"),
        ({"messages": []}, "messages must be a non-empty list"),
        ({"messages": ["hi"]}, r"messages\[0\] must be a dict"),
        ({"max_tokens": -5}, "max_tokens must be a whole number >= 1"),
        ({"needs": {"telepathy"}}, "needs='telepathy' is not a requirement"),
        ({"on_device": "yes"}, "on_device must be True or False"),
        ({"api_base": "http://evil.example"}, "api_base= is not accepted"),
        ({"fallbacks": ["x"]}, "fallbacks= is not accepted"),
        ({"num_retries": 2}, "num_retries= is not accepted"),
    ],
)
def test_bad_call_arguments_fail_before_sending(
    fake: FakeProvider, kwargs: dict[str, Any], match: str
) -> None:
    """Malformed arguments raise ConfigError naming the field, and nothing is sent."""
    kwargs = {"messages": MESSAGES, **kwargs}
    with pytest.raises(ConfigError, match=match):
        three(fake).completion(model="g", **kwargs)
    assert fake.requests() == 0


@pytest.mark.parametrize(
    ("name", "value"), [("num_retries", 3), ("model_fallbacks", [{"a": ["b"]}])]
)
def test_litellm_globals_that_defeat_the_router_are_refused(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch, name: str, value: Any
) -> None:
    """A global num_retries or model_fallbacks stops the router with a clear error."""
    router = three(fake)
    monkeypatch.setattr(litellm, name, value)
    with pytest.raises(ConfigError, match=f"litellm.{name} is set"):
        router.completion(model="g", messages=MESSAGES)
    with pytest.raises(ConfigError, match=f"litellm.{name} is set"):
        three(fake)
    assert fake.requests() == 0
    assert getattr(litellm, name) == value


def test_secrets_never_appear_in_repr_journey_or_errors(fake: FakeProvider) -> None:
    """API keys are redacted from reprs, journeys and the errors a caller sees."""
    leaky = f"Incorrect API key provided: {KEY_PREFIX}first"
    fake.script("first", Fail(401, leaky))
    fake.script("middle", Fail(503))
    fake.script("last", Fail(500, f"boom {KEY_PREFIX}last"))
    router = Router([fake_route(fake, n) for n in NAMES], breaker=Breaker(failures=1))
    with pytest.raises(litellm.InternalServerError) as caught:
        router.completion(model="g", messages=MESSAGES)
    journey = caught.value.journey  # type: ignore[attr-defined]
    texts = [
        repr(router),
        *(repr(r) for r in router.routes),
        str(journey),
        repr(journey),
        *caught.value.__notes__,
        repr(router.health()),
    ]
    assert all(KEY_PREFIX not in t for t in texts)
    assert router.health()["openai/last"].last_error == "boom ***"
    assert journey.attempts[0].error == "Incorrect API key provided: ***"


def test_failing_run_prints_nothing_to_stdout(
    fake: FakeProvider, capfd: pytest.CaptureFixture[str]
) -> None:
    """Failing over prints nothing: LiteLLM's help banner is silenced."""
    for name in NAMES:
        fake.script(name, Fail(503), Fail(503))
    with pytest.raises(litellm.ServiceUnavailableError):
        three(fake).completion(model="g", messages=MESSAGES)
    with pytest.raises(litellm.ServiceUnavailableError):
        run(three(fake), "astream")
    assert fake.requests() == 6
    assert capfd.readouterr().out == ""


def test_litellm_callbacks_fire_once_per_attempt_with_the_route_label(fake: FakeProvider) -> None:
    """A user's LiteLLM success and failure callbacks still fire, labelled with the route."""
    seen: list[tuple[str, str]] = []

    def on_success(kwargs: dict[str, Any], *_: Any) -> None:
        seen.append(("ok", kwargs["litellm_params"]["metadata"]["policy_router"]["route"]))

    def on_failure(kwargs: dict[str, Any], *_: Any) -> None:
        seen.append(("fail", kwargs["litellm_params"]["metadata"]["policy_router"]["route"]))

    fake.script("first", Fail(503))
    old = litellm.success_callback, litellm.failure_callback
    litellm.success_callback, litellm.failure_callback = [on_success], [on_failure]
    try:
        three(fake).completion(model="g", messages=MESSAGES)
        # LiteLLM runs success callbacks on a worker thread after the call returns.
        deadline = time.monotonic() + 5
        while len(seen) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        litellm.success_callback, litellm.failure_callback = old
    assert sorted(seen) == [("fail", "openai/first"), ("ok", "openai/middle")]


def test_duplicate_routes_get_unique_names(fake: FakeProvider) -> None:
    """Two routes to one model are told apart in journeys as name and name#2."""
    router = Router([fake_route(fake, "m"), fake_route(fake, "m")])
    assert [r.name for r in router.routes] == ["openai/m", "openai/m#2"]
    fake.script("m", Fail(503))
    assert router.route(model="g", messages=MESSAGES).route.name == "openai/m#2"


def test_litellm_custom_logger_sees_every_attempt(fake: FakeProvider) -> None:
    """A CustomLogger in litellm.callbacks is called once per attempt, async path too."""
    from litellm.integrations.custom_logger import CustomLogger

    class Counter(CustomLogger):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.events: list[str] = []

        async def async_log_success_event(
            self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
        ) -> None:
            self.events.append(("ok", kwargs["litellm_params"]["metadata"]["policy_router"]))

        async def async_log_failure_event(
            self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
        ) -> None:
            self.events.append(("fail", kwargs["litellm_params"]["metadata"]["policy_router"]))

    counter = Counter()
    fake.script("first", Fail(503))
    old = list(litellm.callbacks)
    litellm.callbacks = [counter]

    ours: list[str] = []

    async def call_and_wait() -> None:
        response = await three(fake).acompletion(model="g", messages=MESSAGES)
        request = response._hidden_params["policy_router"].id
        # LiteLLM logs on tasks of this loop after the call returns: let them run. Events
        # of earlier tests' calls that LiteLLM's logging worker carried over are not ours.
        for _ in range(500):
            ours[:] = [f"{k} {m['route']}" for k, m in counter.events if m["request_id"] == request]
            if len(ours) >= 2:
                return
            await asyncio.sleep(0.01)

    try:
        asyncio.run(call_and_wait())
    finally:
        litellm.callbacks = old
    assert sorted(ours) == ["fail openai/first", "ok openai/middle"]
