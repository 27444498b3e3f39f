"""Throughput at 500 concurrent async calls: plain litellm.acompletion vs router.acompletion.

Run: `.venv/bin/python tests/bench/throughput.py [concurrency] [rounds]`. FakeProvider runs
in a child process; each round fires `concurrency` calls at once with asyncio.gather and
times the wall clock; variants alternate, median of the rounds. Prints calls per second.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import litellm
from _fake import KEY, MESSAGES, bench_routes, fake_in_child

from policy_router import Breaker, Budget, Router


async def burst(fn: Callable[[], Awaitable[Any]], n: int) -> float:
    started = time.perf_counter()
    await asyncio.gather(*(fn() for _ in range(n)))
    return n / (time.perf_counter() - started)


async def main(n: int, rounds: int) -> None:
    with fake_in_child() as base:
        router = Router(bench_routes(base), budget=Budget("1000000"), breaker=Breaker())
        variants: dict[str, Callable[[], Awaitable[Any]]] = {
            "plain litellm.acompletion": lambda: litellm.acompletion(
                model="openai/a",
                messages=MESSAGES,
                api_base=base,
                api_key=KEY,
                num_retries=0,
                max_retries=0,
                max_tokens=16,
            ),
            "router.acompletion (budget + breaker)": lambda: router.acompletion(
                model="g", messages=MESSAGES, max_tokens=16
            ),
        }
        for fn in variants.values():
            await burst(fn, 50)
        rates: dict[str, list[float]] = {k: [] for k in variants}
        names = list(variants)
        for r in range(rounds):
            for name in names[r % 2 :] + names[: r % 2]:
                rates[name].append(await burst(variants[name], n))
    med = {k: statistics.median(v) for k, v in rates.items()}
    plain = med["plain litellm.acompletion"]
    print(f"{n} concurrent async calls, median of {rounds} rounds:")
    for k, v in med.items():
        print(f"  {k:<40} {v:7.1f} calls/s  {v / plain:5.3f}x plain")


if __name__ == "__main__":
    asyncio.run(
        main(
            int(sys.argv[1]) if len(sys.argv) > 1 else 500,
            int(sys.argv[2]) if len(sys.argv) > 2 else 4,
        )
    )
