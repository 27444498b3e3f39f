"""The router's own CPU per call, around real LiteLLM calls to a local provider.

Run: `make bench` (or `.venv/bin/python tests/bench/overhead.py [calls] [rounds]`).

FakeProvider runs in a child process, so only the caller's CPU is counted. Calls are made
one after another in one event loop; LiteLLM's own functions (`litellm.acompletion`,
`litellm.aembedding`) are wrapped to add up the process CPU spent inside them, so

    the router's own work = CPU per call - CPU inside LiteLLM's call

is measured around real calls over HTTP, not with LiteLLM stubbed (the router's checkpoint,
which LiteLLM calls from inside its call as its pre-call log, counted as the router's), twice: with the
process's CPU clock, and with the event loop's thread's own. LiteLLM hands every call's
success logging to a thread pool as it returns, so process CPU of that thread lands in
whichever window it runs in, the router's included; the loop-thread column counts only the
thread the router runs on (the router itself starts no thread on this path). Variants are
interleaved round by round (the first of each round rotates) and the median round is
reported; absolute figures drift by tens of percent on a shared 2-core machine, so read the
ratios and the "outside LiteLLM" column of one run together.
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import litellm
from _fake import KEY, MESSAGES, bench_routes, fake_in_child

from policy_router import Breaker, Budget, Order, Route, Router
from policy_router.ground.outcome import Wire

# CPU seconds spent inside LiteLLM's functions: the process's, and the loop thread's.
INSIDE = [0.0, 0.0]


def _timed(name: str) -> None:
    original = getattr(litellm, name)

    async def timed(*args: Any, **kwargs: Any) -> Any:
        started, started_here = time.process_time(), time.thread_time()
        try:
            return await original(*args, **kwargs)
        finally:
            INSIDE[0] += time.process_time() - started
            INSIDE[1] += time.thread_time() - started_here

    setattr(litellm, name, timed)


def _checkpoint_counted() -> None:
    """The router's checkpoint runs inside LiteLLM's call (its pre-call log, `Wire.saw`):
    its time is taken back out of "inside LiteLLM", so it counts as the router's own.

    It is timed on the monotonic clock: a CPU clock is a system call here (about 1 µs
    each, two per reading), which would charge the router more for reading the clocks
    than the checkpoint costs. The checkpoint never waits, so its wall time is at least
    its CPU time: the router is charged no less than it spends."""
    original = Wire.saw

    def saw(self: Wire, details: Any) -> None:
        started = time.perf_counter()
        try:
            original(self, details)
        finally:
            spent = time.perf_counter() - started
            INSIDE[0] -= spent
            INSIDE[1] -= spent

    Wire.saw = saw  # type: ignore[method-assign]


def build(base: str) -> dict[str, Callable[[], Awaitable[Any]]]:
    names = ["a", "b", "c"]
    routes = bench_routes(base)
    router = Router(routes)
    broken_in = Router(routes, breaker=Breaker())
    # A cap no benchmark run reaches: every call reserves, settles and is charged.
    budgeted = Router(routes, budget=Budget("1000000"))
    guarded = Router(routes, budget=Budget("1000000"), breaker=Breaker(), deadline=20.0)
    # Limits no run reaches: every call takes a slot, and settles it to the bill.
    limited = Router(bench_routes(base, rpm=10**9, tpm=10**12))
    held = Router(bench_routes(base, rpm=10**9), breaker=Breaker(), budget=Budget("1000000"))
    busy = Router(routes, order=Order.LEAST_BUSY)
    observed = Router(routes, observers=[_otel_observer()])
    # opentelemetry-api alone, no SDK: what an installed observer costs where nobody
    # collects (its spans and instruments are the API's no-ops).
    from policy_router.integrations.otel import OTelObserver

    api_only = Router(routes, observers=[OTelObserver()])
    embedder = Router(
        [
            Route(f"openai/e{n}", group="e", api_base=base, api_key=KEY, capabilities={"embedding": True})
            for n in "abc"
        ]
    )
    lrouter = litellm.Router(
        model_list=[
            {
                "model_name": "g",
                "litellm_params": {"model": f"openai/{n}", "api_base": base, "api_key": KEY},
            }
            for n in names
        ],
        num_retries=0,
    )
    plain = {"api_base": base, "api_key": KEY, "num_retries": 0, "max_retries": 0}
    forward = _forwarding(routes[0])
    return {
        "plain litellm.acompletion": lambda: litellm.acompletion(
            model="openai/a", messages=MESSAGES, **plain
        ),
        "bare forwarding (no policy)": lambda: forward(messages=MESSAGES),
        "router.acompletion (3 routes)": lambda: router.acompletion(model="g", messages=MESSAGES),
        "router.acompletion + breaker": lambda: broken_in.acompletion(
            model="g", messages=MESSAGES
        ),
        "router.acompletion + budget": lambda: budgeted.acompletion(
            model="g", messages=MESSAGES, max_tokens=64
        ),
        "+ breaker + deadline": lambda: guarded.acompletion(
            model="g", messages=MESSAGES, max_tokens=64
        ),
        "+ rate limits (rpm, tpm)": lambda: limited.acompletion(
            model="g", messages=MESSAGES, max_tokens=64
        ),
        "+ breaker + budget + rpm": lambda: held.acompletion(
            model="g", messages=MESSAGES, max_tokens=64
        ),
        "order=LEAST_BUSY": lambda: busy.acompletion(model="g", messages=MESSAGES),
        "+ OTelObserver (API, no SDK)": lambda: api_only.acompletion(
            model="g", messages=MESSAGES
        ),
        "+ OTelObserver (SDK, no-op export)": lambda: observed.acompletion(
            model="g", messages=MESSAGES
        ),
        "litellm.Router.acompletion": lambda: lrouter.acompletion(model="g", messages=MESSAGES),
        "plain litellm.aembedding": lambda: litellm.aembedding(
            model="openai/ea", input=["Say hello."], **plain
        ),
        "router.aembedding (3 routes)": lambda: embedder.aembedding(
            model="e", input=["Say hello."]
        ),
    }


def _forwarding(route: Route) -> Callable[..., Awaitable[Any]]:
    """The least any router adds here, for scale: a call forwarded to one route, its kwargs
    merged under the call's and retries off, with no policy, no id and no record."""

    async def forward(**kwargs: Any) -> Any:
        merged = route.kwargs.copy()
        merged.update(kwargs)
        merged["model"], merged["num_retries"], merged["max_retries"] = route.model, 0, 0
        return await litellm.acompletion(**merged)

    return forward


def _otel_observer() -> Any:
    """OpenTelemetry's SDK recording every span and metric, exporting to nowhere: the cost
    of the observer itself, batch processor thread included (process CPU counts it)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from policy_router.integrations.otel import OTelObserver

    class Nowhere(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(Nowhere()))
    return OTelObserver(tracer_provider=tracer_provider, meter_provider=MeterProvider())


async def measure(fn: Callable[[], Awaitable[Any]], calls: int) -> tuple[float, float, float]:
    """Process CPU per call, what of it was outside LiteLLM's function, and the same for
    the loop's thread alone."""
    INSIDE[0] = INSIDE[1] = 0.0
    started, started_here = time.process_time(), time.thread_time()
    for _ in range(calls):
        await fn()
    total, here = time.process_time() - started, time.thread_time() - started_here
    return total / calls, (total - INSIDE[0]) / calls, (here - INSIDE[1]) / calls


async def main(calls: int, rounds: int) -> None:
    for name in ("acompletion", "aembedding"):
        _timed(name)
    _checkpoint_counted()
    with fake_in_child() as base:
        variants = build(base)
        for fn in variants.values():  # warm up: first calls build clients and caches
            await measure(fn, 20)
        samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in variants}
        names = list(variants)
        for r in range(rounds):
            # Rotate who goes first: a variant measured right after another pays for the
            # garbage the other left behind.
            for name in names[r % len(names) :] + names[: r % len(names)]:
                gc.collect()
                samples[name].append(await measure(variants[name], calls))
    print(
        f"CPU per call, median of {rounds} rounds x {calls} calls, FakeProvider in a child "
        f"process (litellm {version('litellm')}):"
    )
    print(
        f"  {'':<36} {'total':>9} {'vs plain':>9} {'outside LiteLLM':>16} {'(rounds)':>11}"
        f" {'above floor':>12} {'(loop thread)':>14}"
    )
    for name, values in samples.items():
        total = statistics.median(t for t, _, _ in values)
        outsides = [o for _, o, _ in values]
        outside = statistics.median(outsides)
        here = statistics.median(h for _, _, h in values)
        base_name = "plain litellm.aembedding" if "embedding" in name else "plain litellm.acompletion"
        plain = statistics.median(t for t, _, _ in samples[base_name])
        # The plain call's own "outside" is the measuring wrapper and the loop's step: the
        # same in every row, so what a row adds to a direct LiteLLM call is its outside
        # minus that floor.
        floor = statistics.median(o for _, o, _ in samples[base_name])
        print(
            f"  {name:<36} {total * 1e3:7.3f} ms {total / plain:8.3f}x {outside * 1e6:11.0f} us"
            f" {min(outsides) * 1e6:5.0f}-{max(outsides) * 1e6:<5.0f}"
            f" {(outside - floor) * 1e6:9.0f} us {here * 1e6:11.0f} us"
        )
    _ratios(samples)
    spread = [t for t, _, _ in samples["plain litellm.acompletion"]]
    print(
        f"  noise: plain litellm.acompletion rounds ranged {min(spread) * 1e3:.3f}-"
        f"{max(spread) * 1e3:.3f} ms; the outside column of plain calls is the wrapper's own "
        "cost and the floor of what this method can see"
    )


def _ratios(samples: dict[str, list[tuple[float, float, float]]]) -> None:
    """The two targets, on the common call (`Router(routes)`, 3 routes, the default breaker):
    the router's own CPU, its outside less the floor every row pays for being measured, at
    most 1/30 of LiteLLM Router's own, and at most 1% of a plain call's whole CPU."""
    floor = statistics.median(o for _, o, _ in samples["plain litellm.acompletion"])
    plain = statistics.median(t for t, _, _ in samples["plain litellm.acompletion"])
    ours = statistics.median(o for _, o, _ in samples["router.acompletion (3 routes)"]) - floor
    theirs = statistics.median(o for _, o, _ in samples["litellm.Router.acompletion"]) - floor
    print(
        f"  the common call's own CPU (outside less the floor): {ours * 1e6:.0f} us; "
        f"LiteLLM Router's: {theirs * 1e6:.0f} us -> 1/{theirs / ours:.1f} (target 1/30); "
        f"{ours / plain:.2%} of plain litellm.acompletion's {plain * 1e3:.3f} ms (target 1%)"
    )


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    r = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    asyncio.run(main(n, r))
