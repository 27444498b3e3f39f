"""CPU time per call: plain litellm.acompletion vs router.acompletion vs litellm.Router.

Run: `make bench` (or `.venv/bin/python tests/bench/overhead.py [calls] [rounds]`).
FakeProvider runs in a child process so only the caller's CPU is measured. Variants are
interleaved round by round and the median round is reported, because absolute figures
drift by tens of percent on a shared 2-core machine; only the ratios of one run mean much.
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

from policy_router import Breaker, Budget, Router


def build(base: str) -> dict[str, Callable[[], Awaitable[Any]]]:
    key, names = KEY, ["a", "b", "c"]
    routes = bench_routes(base)
    router = Router(routes)
    # A cap no benchmark run reaches: every call reserves, settles and is charged.
    budgeted = Router(routes, budget=Budget("1000000"))
    guarded = Router(routes, budget=Budget("1000000"), breaker=Breaker(), deadline=20.0)
    lrouter = litellm.Router(
        model_list=[
            {
                "model_name": "g",
                "litellm_params": {"model": f"openai/{n}", "api_base": base, "api_key": key},
            }
            for n in names
        ],
        num_retries=0,
    )
    return {
        "plain litellm.acompletion": lambda: litellm.acompletion(
            model="openai/a",
            messages=MESSAGES,
            api_base=base,
            api_key=key,
            num_retries=0,
            max_retries=0,
        ),
        "router.acompletion (3 routes)": lambda: router.acompletion(model="g", messages=MESSAGES),
        "router.acompletion + budget": lambda: budgeted.acompletion(
            model="g", messages=MESSAGES, max_tokens=64
        ),
        "+ breaker + deadline": lambda: guarded.acompletion(
            model="g", messages=MESSAGES, max_tokens=64
        ),
        "litellm.Router.acompletion": lambda: lrouter.acompletion(model="g", messages=MESSAGES),
    }


async def measure(fn: Callable[[], Awaitable[Any]], calls: int) -> float:
    started = time.process_time()
    for _ in range(calls):
        await fn()
    return (time.process_time() - started) / calls


async def main(calls: int, rounds: int) -> None:
    with fake_in_child() as base:
        variants = build(base)
        for fn in variants.values():  # warm up: first calls build clients and caches
            await measure(fn, 20)
        samples: dict[str, list[float]] = {name: [] for name in variants}
        names = list(variants)
        for r in range(rounds):
            # Rotate who goes first: a variant measured right after another pays for the
            # garbage the other left behind.
            for name in names[r % len(names) :] + names[: r % len(names)]:
                gc.collect()
                samples[name].append(await measure(variants[name], calls))
    med = {name: statistics.median(v) for name, v in samples.items()}
    plain = med["plain litellm.acompletion"]
    print(
        f"CPU per call, median of {rounds} rounds x {calls} calls (litellm {version('litellm')}):"
    )
    for name, value in med.items():
        print(f"  {name:<34} {value * 1e3:7.3f} ms   {value / plain:5.3f}x plain")
    ours = med["router.acompletion (3 routes)"] - plain
    theirs = med["litellm.Router.acompletion"] - plain
    print(
        f"  overhead over plain: ours {ours * 1e3:+.3f} ms, litellm.Router {theirs * 1e3:+.3f} ms"
        + (f" (ours / theirs = {ours / theirs:.2f})" if theirs > 0 else "")
    )


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    r = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    asyncio.run(main(n, r))
