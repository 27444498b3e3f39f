"""Route selection alone (the pure core) over 10, 100, 1,000 and 10,000 routes.

Run: `.venv/bin/python tests/bench/selection.py`. Builds a Plan for a request needing
tools, with a third of the routes lacking tools and a third vendor routes under the
on-device floor, and takes its first decision; no I/O. Prints microseconds per selection
and the growth per route. (LiteLLM's Router has been reported at 51 ms for 1,000.)
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from policy_router import (
    Breaker,
    Budget,
    InMemoryStore,
    MonotonicClock,
    PriceTable,
    Requirements,
    Route,
)
from policy_router.core.checks import sift
from policy_router.core.plan import Plan
from policy_router.ground.capability import Capability
from policy_router.ground.outcome import Fault, FaultKind
from policy_router.policies.bounds import RequestFacts
from policy_router.policies.breaker import HealthBook
from policy_router.policies.budget import Ledger
from policy_router.policies.candidate import Candidate
from policy_router.policies.capabilities import resolve
from policy_router.policies.order import cheapest


def candidates(n: int, prices: PriceTable) -> list[Candidate]:
    out = []
    for i in range(n):
        caps = {Capability.TOOLS: i % 3 != 0, Capability.STREAMING: True}
        route = Route(
            f"openai/m{i}",
            group="g",
            reach="vendor" if i % 3 == 1 else "on_device",
            api_key="k",
            prices=prices,
        )
        out.append(
            Candidate(route=route, capabilities=resolve(route.model, None, False, caps), price=prices.rows.get(route.model))
        )
    return out


def main() -> None:
    clock = MonotonicClock()
    needs = Requirements(tools=True, on_device=True)
    facts = RequestFacts(prompt_tokens=200, prompt_bound=800, reply_tokens=100)
    print("selection (Plan built and first route chosen), breaker + budget + cheapest order:")
    previous = None
    for n in (10, 100, 1_000, 10_000):
        prices = PriceTable.from_dict(
            {
                "currency": "USD",
                "as_of": "2026-11-29",
                "source": "bench",
                "models": {
                    f"openai/m{i}": {"input": str(1 + i % 7), "output": "2"} for i in range(n)
                },
            }
        )
        cs = candidates(n, prices)
        store = InMemoryStore()
        ledger = Ledger(Budget("1000000"), store)
        health = HealthBook(Breaker(), store, lambda _: None)
        reps = max(20, 20_000 // n)
        sifted = sift(cs, needs)  # the router sifts once per (group, needs)
        started = time.perf_counter()
        for _ in range(reps):
            plan = Plan(
                "g",
                cs,
                needs,
                clock=clock,
                ordering=lambda c: cheapest(c, facts),
                ledger=ledger,
                facts=facts,
                health=health,
                sifted=sifted,
            )
            send = plan.run(plan.next())
            assert send is not None
            plan.run(plan.failed(send, Fault(FaultKind.BAD_REQUEST)))
        per = (time.perf_counter() - started) / reps
        growth = (
            "" if previous is None else f"  ({per / previous[1] * previous[0] / n:.2f}x linear)"
        )
        print(f"  {n:>6} routes  {per * 1e6:10.1f} us{growth}")
        previous = (n, per)


if __name__ == "__main__":
    main()
