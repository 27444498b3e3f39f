"""How long a request takes to end against a silent or trickling provider, per driver.

Run: `.venv/bin/python tests/bench/deadline.py`. A 2 s router deadline with a 30 s
LiteLLM timeout; then a fallback route with a 1 s per-attempt timeout. Prints seconds.
"""

from __future__ import annotations

import asyncio
import os
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from policy_router import DeadlineExceededError, Route, Router
from policy_router.testing import FakeProvider, Hang, Reply, Trickle

MESSAGES = [{"role": "user", "content": "Say hello."}]
CAPS = {"tools": True, "streaming": True}


def timed(router: Router, driver: str, **kw: object) -> tuple[float, str]:
    kw = {"model": "g", "messages": MESSAGES, **kw}
    stream = {"stream": True} if "stream" in driver else {}
    started = time.monotonic()
    try:
        if driver.startswith("a"):
            routed = asyncio.run(router.aroute(**kw, **stream))
        else:
            routed = router.route(**kw, **stream)
        outcome = f"answered by {routed.route.name}"
    except DeadlineExceededError:
        outcome = "DeadlineExceededError"
    return time.monotonic() - started, outcome


def main() -> None:
    with FakeProvider() as fake:

        def route(name: str) -> Route:
            return Route(
                f"openai/{name}",
                group="g",
                api_base=fake.base_url,
                api_key="sk-b",
                capabilities=CAPS,
            )

        providers = {
            "silent": Hang(30),
            "trickling": Trickle(Reply("a b c d e f g h i j k l m n o p"), pieces=40, gap=0.25),
        }
        print("deadline=2.0 s, timeout=30 s (a stream's deadline covers its first chunk):")
        for name, step in providers.items():
            for driver in ("sync", "async", "stream", "astream"):
                fake.script("slow", step)
                took, outcome = timed(Router([route("slow")], deadline=2.0), driver, timeout=30)
                print(f"  {name:<10} {driver:<8} {took:6.3f} s  {outcome}")
        print("deadline=2.0 s, timeout=1 s per attempt, silent first route, then a fallback:")
        for driver in ("sync", "async", "stream", "astream"):
            fake.script("slow", Hang(30))
            router = Router([route("slow"), route("fallback")], deadline=2.0)
            took, outcome = timed(router, driver, timeout=1)
            print(f"  {driver:<8} {took:6.3f} s  {outcome}")


if __name__ == "__main__":
    main()
