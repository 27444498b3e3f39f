"""OpenTelemetry: a span per request with a child per attempt (GenAI conventions), skips as
events, stream spans ending with the stream, metrics that add up to the journeys, and the
request id in LiteLLM's callback metadata. Read through the SDK's in-memory exporter and
metric reader, over FakeProvider."""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from policy_router import Breaker, Budget, ManualClock, PriceTable, Router
from policy_router.integrations.otel import OTelObserver
from policy_router.testing import Drop, Fail, FakeProvider, Hang, Reply

from .conftest import MESSAGES, fake_route

TABLE = PriceTable.from_dict(
    {
        "currency": "USD",
        "as_of": "2026-11-01",
        "source": "tests",
        "models": {f"openai/{n}": {"input": "1", "output": "2"} for n in ("a", "b", "c")},
    }
)


class Telemetry:
    """An SDK tracer and meter provider reading into memory."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.observer = OTelObserver(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider
        )

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found += list(metric.data.data_points)
        return found

    def total(self, name: str, **where: Any) -> float:
        """The sum of a counter's (or a histogram's `sum` of) points matching `where`."""
        points = [
            p for p in self.points(name) if all(p.attributes.get(k) == v for k, v in where.items())
        ]
        return sum(getattr(p, "value", None) or getattr(p, "sum", 0) for p in points)


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    yield telemetry
    telemetry.tracer_provider.shutdown()
    telemetry.meter_provider.shutdown()


def routes(fake: FakeProvider, **kw: Any) -> list[Any]:
    return [fake_route(fake, n, prices=TABLE, **kw) for n in ("a", "b", "c")]


def test_a_request_that_falls_through_twice_is_one_span_with_three_attempt_children(
    fake: FakeProvider, otel: Telemetry
) -> None:
    fake.script("a", Fail(503))
    fake.script("b", Fail(429, retry_after=3))
    fake.script("c", Reply("hello there", usage=(11, 2)))
    router = Router(routes(fake), observers=[otel.observer], budget=Budget("1"))
    tracer = otel.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("handle /ask") as outer:
        routed = router.route(model="g", messages=MESSAGES, max_tokens=20, temperature=0.2)
    spans = {s.name: s for s in otel.finished()}
    request = spans["policy_router.request"]
    attempts = sorted(
        (s for s in otel.finished() if s.parent and s.parent.span_id == request.context.span_id),
        key=lambda s: s.start_time or 0,
    )
    # Nested in the caller's trace, with three CLIENT children named by the conventions.
    assert request.parent is not None and request.parent.span_id == outer.get_span_context().span_id
    assert request.context.trace_id == outer.get_span_context().trace_id
    assert [s.name for s in attempts] == ["chat a", "chat b", "chat c"]
    assert all(s.kind is SpanKind.CLIENT for s in attempts)
    a, b, c = (dict(s.attributes or {}) for s in attempts)
    assert a["error.type"] == "server_error" and a["http.response.status_code"] == 503
    assert b["error.type"] == "rate_limited" and "error.type" not in c
    assert attempts[0].status.status_code is StatusCode.ERROR
    assert c["gen_ai.operation.name"] == "chat" and c["gen_ai.provider.name"] == "openai"
    assert c["gen_ai.request.model"] == "c" and c["gen_ai.request.max_tokens"] == 20
    assert c["gen_ai.request.temperature"] == 0.2
    assert (c["gen_ai.usage.input_tokens"], c["gen_ai.usage.output_tokens"]) == (11, 2)
    assert c["server.address"] == "127.0.0.1" and isinstance(c["server.port"], int)
    assert [x["policy_router.attempt"] for x in (a, b, c)] == [1, 2, 3]
    assert c["policy_router.cost_micros"] == 11 * 1 + 2 * 2
    r = dict(request.attributes or {})
    assert r["policy_router.request_id"] == routed.journey.id == c["policy_router.request_id"]
    assert r["policy_router.answered_by"] == "openai/c" and r["policy_router.attempts"] == 3
    assert r["policy_router.outcome"] == "answered" and r["policy_router.cost_micros"] == 15
    assert request.status.status_code is not StatusCode.ERROR
    # No prompt or reply text anywhere.
    text = str([dict(s.attributes or {}) for s in otel.finished()])
    assert "Say hello" not in text and "hello there" not in text


def test_skips_are_events_and_a_failed_request_is_an_error_span(
    fake: FakeProvider, otel: Telemetry
) -> None:
    router = Router(
        [fake_route(fake, "a", capabilities={"tools": False}), *routes(fake)[1:2]],
        observers=[otel.observer],
    )
    fake.script("b", Fail(503))
    with pytest.raises(litellm.ServiceUnavailableError) as caught:
        router.completion(model="g", messages=MESSAGES, tools=[_TOOL])
    (request,) = [s for s in otel.finished() if s.name == "policy_router.request"]
    (skip,) = [e for e in request.events if e.name == "policy_router.skip"]
    assert skip.attributes is not None
    assert skip.attributes["policy_router.route"] == "openai/a"
    assert skip.attributes["policy_router.check"] == "requirements"
    assert "tools" in str(skip.attributes["policy_router.skip_reason"])
    assert request.status.status_code is StatusCode.ERROR
    assert (request.attributes or {})["error.type"] == type(caught.value).__name__
    assert otel.total("policy_router.attempts", **{"policy_router.outcome": "skipped"}) == 1


_TOOL = {
    "type": "function",
    "function": {"name": "f", "parameters": {"type": "object", "properties": {}}},
}


def test_a_streams_spans_end_when_the_stream_ends(fake: FakeProvider, otel: Telemetry) -> None:
    router = Router(routes(fake), observers=[otel.observer])
    stream = router.completion(model="g", messages=MESSAGES, stream=True)
    assert otel.finished() == []  # open while the caller reads
    first = next(iter(stream))
    time.sleep(0.05)
    read_at = time.time_ns()
    text = (first.choices[0].delta.content or "") + "".join(
        c.choices[0].delta.content or "" for c in stream
    )
    assert text
    spans = {s.name: s for s in otel.finished()}
    attempt, request = spans["chat a"], spans["policy_router.request"]
    assert (attempt.end_time or 0) >= read_at and (request.end_time or 0) >= read_at
    attrs = dict(attempt.attributes or {})
    # The first chunk came before the 0.05 s the reader slept; the span lasted past it.
    whole = ((attempt.end_time or 0) - (attempt.start_time or 0)) / 1e9
    assert attrs["policy_router.time_to_first_chunk"] <= whole - 0.05
    assert attrs["gen_ai.usage.output_tokens"] > 0


async def test_async_calls_nest_in_the_callers_task_context(
    fake: FakeProvider, otel: Telemetry
) -> None:
    router = Router(routes(fake), observers=[otel.observer])
    tracer = otel.tracer_provider.get_tracer("app")

    async def handle(name: str) -> str:
        with tracer.start_as_current_span(name) as span:
            await router.acompletion(model="g", messages=MESSAGES)
            return format(span.get_span_context().span_id, "x")

    parents = await asyncio.gather(handle("one"), handle("two"))
    requests = [s for s in otel.finished() if s.name == "policy_router.request"]
    assert sorted(format(s.parent.span_id, "x") for s in requests if s.parent) == sorted(parents)


def test_a_request_never_sent_and_a_probe_are_marked(
    fake: FakeProvider, otel: Telemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from policy_router import Route

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    keyless = Route("openai/x", group="g", api_base=fake.base_url, capabilities={"tools": True})
    clock = ManualClock()
    router = Router(
        [keyless, fake_route(fake, "a")],
        observers=[otel.observer],
        breaker=Breaker(failures=1, cooldown=5),
        clock=clock,
    )
    router.completion(model="g", messages=MESSAGES)
    not_sent = [s for s in otel.finished() if s.name == "chat x"]
    assert (not_sent[0].attributes or {})["error.type"] == "not_sent"
    assert (not_sent[0].attributes or {})["policy_router.sent"] is False
    fake.script("a", Fail(500))
    with pytest.raises(litellm.InternalServerError):
        router.completion(model="g", messages=MESSAGES)
    clock.advance(5)
    router.completion(model="g", messages=MESSAGES)
    probes = [dict(s.attributes or {}) for s in otel.finished() if s.name == "chat a"]
    assert [p.get("policy_router.probe", False) for p in probes] == [False, False, True]


def test_metrics_add_up_to_the_journeys(fake: FakeProvider, otel: Telemetry) -> None:
    """Random faults over 40 requests: the counters equal what the journeys and the
    provider say; the gauges equal what the router reports; nothing stays in flight."""
    rng = random.Random(5)
    for name in ("a", "b", "c"):
        fake.script(
            name,
            *[rng.choice([Fail(503), Reply("ok", usage=(4, 3)), Reply("ok")]) for _ in range(40)],
        )
    router = Router(
        routes(fake), observers=[otel.observer], budget=Budget("1"), breaker=Breaker(failures=2)
    )
    outcomes: Counter[str] = Counter()
    attempts = 0
    for _ in range(40):
        try:
            attempts += router.route(model="g", messages=MESSAGES, max_tokens=5).attempts
            outcomes["answered"] += 1
        except Exception as error:  # every route failed, or every route rests
            journey = error.journey  # type: ignore[attr-defined]
            attempts += len(journey.attempts)
            outcomes[type(error).__name__] += 1
    assert otel.total("policy_router.requests") == 40
    for outcome, n in outcomes.items():
        assert otel.total("policy_router.requests", **{"policy_router.outcome": outcome}) == n
    sent = otel.total("policy_router.attempts") - otel.total(
        "policy_router.attempts", **{"policy_router.outcome": "skipped"}
    )
    assert sent == attempts == fake.requests()
    spending = router.spending()
    assert otel.total("policy_router.cost") == spending.spent.micros
    assert otel.total("policy_router.in_flight") == 0
    (spent,) = otel.points("policy_router.budget.spent")
    assert spent.value == spending.spent.micros
    (resting,) = otel.points("policy_router.routes.resting")
    assert resting.value == len(router.resting())
    tokens_in = otel.total("gen_ai.client.token.usage", **{"gen_ai.token.type": "input"})
    assert tokens_in > 0
    assert len(otel.points("gen_ai.client.operation.duration")) >= 1


def test_litellm_callbacks_get_the_request_id_and_attempt_number(fake: FakeProvider) -> None:
    seen: list[dict[str, Any]] = []

    def on_any(kwargs: dict[str, Any], *_: Any) -> None:
        seen.append(kwargs["litellm_params"]["metadata"]["policy_router"])

    fake.script("a", Fail(503))
    old = litellm.success_callback, litellm.failure_callback
    litellm.success_callback, litellm.failure_callback = [on_any], [on_any]
    try:
        routed = Router(routes(fake)).route(model="g", messages=MESSAGES)
        deadline = time.monotonic() + 5
        while len(seen) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        litellm.success_callback, litellm.failure_callback = old
    assert sorted((m["route"], m["attempt"]) for m in seen) == [("openai/a", 1), ("openai/b", 2)]
    assert {m["request_id"] for m in seen} == {routed.journey.id}


def test_without_opentelemetry_the_import_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "policy_router.integrations.otel", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'policy-router\[otel\]'"):
        import policy_router.integrations.otel  # noqa: F401


_KINDS = ("sync", "async", "stream", "astream", "embedding")
_STEPS = {
    "503": lambda: Fail(503),
    "429": lambda: Fail(429, retry_after=0),
    "drop": lambda: Drop(),
    "reply": lambda: Reply("fine"),
}


async def _one(router: Router, kind: str) -> Any:
    """One request of `kind`, read to its end: its journey (from the answer or the error)."""
    try:
        if kind == "sync":
            return router.route(model="g", messages=MESSAGES).journey
        if kind == "async":
            return (await router.aroute(model="g", messages=MESSAGES)).journey
        if kind == "embedding":
            return (await router.aroute(model="e", endpoint="embedding", input=["a"])).journey
        if kind == "stream":
            stream = router.completion(model="g", messages=MESSAGES, stream=True)
            for _ in stream:
                pass
        else:
            stream = await router.acompletion(model="g", messages=MESSAGES, stream=True)
            async for _ in stream:
                pass
        return stream.journey
    except Exception as error:  # every route failed: the journey rides on the error
        return error.journey  # type: ignore[attr-defined]


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    calls=st.lists(
        st.tuples(
            st.sampled_from(_KINDS),
            st.lists(st.sampled_from(sorted(_STEPS)), max_size=3),
            st.lists(st.sampled_from(sorted(_STEPS)), max_size=2),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_every_request_shape_is_one_closed_span_tree_that_adds_up(
    fake: FakeProvider, calls: list[tuple[str, list[str], list[str]]]
) -> None:
    """Any mix of sync, async, streamed and embedding requests over any faults: one ended
    request span per request, one ended child per request sent (as many as its journey's
    attempts and the provider's count), counters equal to the journeys, nothing left open."""
    fake.reset()
    otel = Telemetry()
    chat = [fake_route(fake, n) for n in ("a", "b")]
    embed = [fake_route(fake, n, group="e", capabilities={"embedding": True}) for n in ("ea", "eb")]
    router = Router([*chat, *embed], observers=[otel.observer])
    journeys = []
    for kind, first_steps, second_steps in calls:
        first, second = ("ea", "eb") if kind == "embedding" else ("a", "b")
        fake.script(first, *(_STEPS[s]() for s in first_steps))
        fake.script(second, *(_STEPS[s]() for s in second_steps))
        journeys.append(asyncio.run(_one(router, kind)))
        assert fake.requests() == len(journeys[-1].attempts)
        fake.reset()  # nothing left queued for the next request
    spans = otel.finished()
    requests = [s for s in spans if s.name == "policy_router.request"]
    assert len(requests) == len(calls)
    by_id = {(s.attributes or {})["policy_router.request_id"]: s for s in requests}
    for journey in journeys:
        request = by_id[journey.id]
        children = [s for s in spans if s.parent and s.parent.span_id == request.context.span_id]
        assert len(children) == len(journey.attempts)
        assert all(s.end_time is not None for s in children)
        assert (request.attributes or {})["policy_router.attempts"] == len(journey.attempts)
    sent = sum(len(j.attempts) for j in journeys)
    skipped = otel.total("policy_router.attempts", **{"policy_router.outcome": "skipped"})
    assert otel.total("policy_router.attempts") - skipped == sent
    assert otel.total("policy_router.requests") == len(calls)
    assert otel.total("policy_router.in_flight") == 0
    assert otel.observer._open == {}
    otel.tracer_provider.shutdown()
    otel.meter_provider.shutdown()


async def test_a_cancelled_call_ends_its_spans(fake: FakeProvider, otel: Telemetry) -> None:
    fake.script("a", Hang(5))
    router = Router(routes(fake), observers=[otel.observer])
    task = asyncio.create_task(router.acompletion(model="g", messages=MESSAGES))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    spans = {s.name: s for s in otel.finished()}
    assert (spans["chat a"].attributes or {})["error.type"] == "cancelled"
    assert (spans["policy_router.request"].attributes or {})["error.type"] == "CancelledError"
    assert otel.total("policy_router.in_flight") == 0 and otel.observer._open == {}


def test_without_an_sdk_or_when_sampled_out_nothing_is_recorded_and_calls_work(
    fake: FakeProvider,
) -> None:
    from opentelemetry.metrics import NoOpMeterProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
    from opentelemetry.trace import NoOpTracerProvider

    fake.script("a", Fail(503))
    no_ops = OTelObserver(tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider())
    spans = InMemorySpanExporter()
    sampled_out = TracerProvider(sampler=ALWAYS_OFF)
    sampled_out.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    counting = OTelObserver(
        tracer_provider=sampled_out, meter_provider=MeterProvider(metric_readers=[reader])
    )
    routed = Router(routes(fake), observers=[no_ops, counting]).route(model="g", messages=MESSAGES)
    assert routed.attempts == 2 and spans.get_finished_spans() == ()
    data = reader.get_metrics_data()
    assert data is not None
    names = {m.name for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics}
    assert {"policy_router.requests", "policy_router.attempts"} <= names
    assert no_ops._open == {} and counting._open == {}


def test_a_config_turns_it_on_with_the_applications_providers(
    fake: FakeProvider, otel: Telemetry, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`observers: {otel: true}` in a policy file: the global tracer and meter providers."""
    import opentelemetry.metrics._internal as metrics_internal
    from opentelemetry import trace

    monkeypatch.setattr(trace, "get_tracer_provider", lambda: otel.tracer_provider)
    monkeypatch.setattr(metrics_internal, "get_meter_provider", lambda: otel.meter_provider)
    monkeypatch.setenv("FAKE_KEY", "sk-fake-a")
    route = {"model": "openai/a", "api_base": fake.base_url, "api_key": "os.environ/FAKE_KEY"}
    config = {
        "groups": {"g": {"routes": [{**route, "capabilities": {"tools": True}}]}},
        "observers": {"otel": True},
    }
    routed = Router.from_config(config).route(model="g", messages=MESSAGES)
    (request,) = [s for s in otel.finished() if s.name == "policy_router.request"]
    assert (request.attributes or {})["policy_router.request_id"] == routed.journey.id
    assert otel.total("policy_router.requests") == 1


def test_a_config_asking_for_otel_without_it_names_the_field_and_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from policy_router import ConfigError

    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "policy_router.integrations.otel", raising=False)
    config = {"groups": {"g": {"routes": [{"model": "openai/gpt-4o-mini"}]}}}
    with pytest.raises(ConfigError, match=r"observers\.otel: .*policy-router\[otel\]"):
        Router.from_config({**config, "observers": {"otel": True}})


def test_an_unpriced_stream_still_reports_its_usage_when_observed(
    fake: FakeProvider, otel: Telemetry
) -> None:
    """Usage is asked of a stream whenever an observer records it, not only for a budget;
    the caller, who did not ask for the usage chunk, does not see it."""
    router = Router([fake_route(fake, "a")], observers=[otel.observer])
    chunks = list(router.completion(model="g", messages=MESSAGES, stream=True))
    assert all(getattr(c, "usage", None) is None or c.choices for c in chunks)
    (attempt,) = [s for s in otel.finished() if s.name == "chat a"]
    assert (attempt.attributes or {})["gen_ai.usage.output_tokens"] > 0
    assert fake.bodies("a")[0]["stream_options"] == {"include_usage": True}


def test_genai_histograms_use_the_advised_buckets_and_name_the_response_model(
    fake: FakeProvider, otel: Telemetry
) -> None:
    """`gen_ai.client.operation.duration` buckets run 0.01 ... 81.92 s, token usage has its
    own, `gen_ai.response.model` is set, and an embedding records no output tokens."""
    router = Router(
        [fake_route(fake, "a"), fake_route(fake, "e", group="e", capabilities={"embedding": True})],
        observers=[otel.observer],
    )
    router.completion(model="g", messages=MESSAGES)
    router.embedding(model="e", input=["one", "two"])
    (duration,) = [p for p in otel.points("gen_ai.client.operation.duration") if p.attributes.get("gen_ai.operation.name") == "chat"]
    assert list(duration.explicit_bounds) == [0.01 * 2**i for i in range(14)]
    tokens = otel.points("gen_ai.client.token.usage")
    assert list(tokens[0].explicit_bounds)[:3] == [1, 4, 16]
    kinds = {(p.attributes["gen_ai.operation.name"], p.attributes["gen_ai.token.type"]) for p in tokens}
    assert ("embeddings", "output") not in kinds and ("embeddings", "input") in kinds
    (chat,) = [s for s in otel.finished() if s.name == "chat a"]
    assert (chat.attributes or {})["gen_ai.response.model"]
    (embed,) = [s for s in otel.finished() if s.name.startswith("embeddings")]
    assert "gen_ai.usage.output_tokens" not in (embed.attributes or {})
