"""`import policy_router` on top of `import litellm`, and memory after many routed calls.

Run: `.venv/bin/python tests/bench/startup_and_memory.py [calls]`. The import is timed in
fresh processes (median of 5). Memory: the router's own state after N calls with LiteLLM
stubbed at the transport seam (real calls would take N x 6 ms), measured with
tracemalloc at 10% of N and at N; bounded means no growth with the number of calls.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tracemalloc

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

CODE = (
    "import time; t = time.perf_counter(); import litellm; a = time.perf_counter(); "
    "import policy_router; b = time.perf_counter(); print(a - t, b - a)"
)


def import_cost() -> None:
    runs = [
        subprocess.run(
            [sys.executable, "-c", CODE], capture_output=True, text=True, check=True
        ).stdout.split()
        for _ in range(5)
    ]
    litellm_s = statistics.median(float(r[0]) for r in runs)
    ours_s = statistics.median(float(r[1]) for r in runs)
    print(
        f"import litellm {litellm_s * 1e3:.0f} ms; import policy_router on top "
        f"{ours_s * 1e3:.1f} ms (median of 5 fresh processes)"
    )


def memory(calls: int) -> None:
    import litellm

    from policy_router import Breaker, Budget, PriceTable, Route, Router
    from policy_router.drive.seam import transport

    response = litellm.ModelResponse(
        choices=[{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        usage={"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    )

    async def stub(
        route: object, kwargs: object, group: str, timeout: float | None = None
    ) -> object:
        return response

    transport.acall = stub  # type: ignore[assignment]
    prices = PriceTable.from_dict(
        {
            "currency": "USD",
            "as_of": "2026-11-29",
            "source": "bench",
            "models": {"openai/a": {"input": "1", "output": "1"}},
        }
    )
    router = Router(
        [
            Route(
                f"openai/{n}",
                group="g",
                api_base="http://127.0.0.1:9/v1",
                api_key="k",
                capabilities={"tools": True},
                prices=prices,
            )
            for n in "abc"
        ],
        budget=Budget("1000000"),
        breaker=Breaker(),
        deadline=20,
    )
    messages = [{"role": "user", "content": "hi"}]

    async def run(n: int) -> None:
        for _ in range(n):
            await router.acompletion(model="g", messages=messages, max_tokens=5)

    tracemalloc.start()
    asyncio.run(run(calls // 10))
    early = tracemalloc.get_traced_memory()[0]
    asyncio.run(run(calls - calls // 10))
    late = tracemalloc.get_traced_memory()[0]
    print(
        f"traced memory after {calls // 10:,} calls {early / 1e6:.2f} MB, after {calls:,} "
        f"calls {late / 1e6:.2f} MB (growth {(late - early) / 1e3:+.1f} kB)"
    )


if __name__ == "__main__":
    import_cost()
    memory(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
