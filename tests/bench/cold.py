"""The router's own CPU per call with LiteLLM stubbed, warm and cold.

Run: `make bench` (or `.venv/bin/python tests/bench/cold.py [calls]`).

Around a real call the router's code and data are cold: LiteLLM's few milliseconds of
Python between two calls evict them from the CPU's caches, and the same code then costs
several times what it costs warm (see the README's benchmark section). This bench stands
in for that without a provider, so two versions of the code can be compared call by call
in one process with little noise: LiteLLM's `acompletion` is replaced by a function that
says the request left (its pre-API-call log) and returns a `ModelResponse`; before each
"cold" call 32 MB are written, which evicts every cache level a core has; the "warm"
figure is the same call made again at once. Each variant is timed alternately, call by
call, on the thread's own CPU clock, the stub's own time taken out. Neither figure is
the headline (`overhead.py` is, around real calls): cold here is a little harsher than
after a real LiteLLM call, warm a lower bound.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import litellm
from _fake import MESSAGES, bench_routes
from litellm import ModelResponse

from policy_router import Breaker, Budget, Router

REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "a",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi."}}
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
}
INSIDE = [0]
_SCRATCH = bytearray(32 << 20)


async def _stub(**kwargs: Any) -> Any:
    seen = kwargs.get("logger_fn")
    if callable(seen):
        # The pre-call log LiteLLM writes for an OpenAI-compatible call; the router's
        # checkpoint reads it, and its time is the router's (it is not taken out).
        seen({
            "log_event_type": "pre_api_call",
            "api_key": "sk-bench",
            "additional_args": {
                "api_base": f"{kwargs.get('api_base')}/chat/completions",
                "headers": {"Authorization": "Bearer sk-bench"},
                "complete_input_dict": {
                    "model": str(kwargs.get("model", "")).split("/", 1)[-1],
                    "messages": kwargs.get("messages"),
                    **({"max_tokens": kwargs["max_tokens"]} if "max_tokens" in kwargs else {}),
                },
            },
        })
    started = time.thread_time_ns()
    reply = ModelResponse(**REPLY)
    INSIDE[0] += time.thread_time_ns() - started
    return reply


def _evict() -> None:
    _SCRATCH[::64] = bytes(len(_SCRATCH) // 64)


async def main(calls: int) -> None:
    litellm.acompletion = _stub  # type: ignore[assignment]
    base = "http://127.0.0.1:9"  # never reached: the stub answers
    variants = {
        "3 routes": (Router(bench_routes(base)), {}),
        "+ breaker": (Router(bench_routes(base), breaker=Breaker()), {}),
        "+ breaker + budget + rpm": (
            Router(bench_routes(base, rpm=10**9), breaker=Breaker(), budget=Budget("1000000")),
            {"max_tokens": 64},
        ),
    }

    async def one(router: Router, kwargs: dict[str, Any]) -> int:
        INSIDE[0] = 0
        started = time.thread_time_ns()
        await router.acompletion(model="g", messages=MESSAGES, **kwargs)
        return time.thread_time_ns() - started - INSIDE[0]

    cold: dict[str, list[int]] = {name: [] for name in variants}
    warm: dict[str, list[int]] = {name: [] for name in variants}
    for i in range(calls + 100):
        for name, (router, kwargs) in variants.items():
            _evict()
            first = await one(router, kwargs)
            again = await one(router, kwargs)
            if i >= 100:  # the first calls build caches and clients
                cold[name].append(first)
                warm[name].append(again)
    print(f"Router CPU per call, LiteLLM stubbed, median of {calls} calls (us):")
    print(f"  {'':<28} {'cold':>7} {'warm':>7}")
    for name in variants:
        print(
            f"  {name:<28} {statistics.median(cold[name]) / 1e3:7.1f} "
            f"{statistics.median(warm[name]) / 1e3:7.1f}"
        )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000))
