"""`policy-router demo`: the router's promises, shown on an embedded FakeProvider.

Runs where nothing but Python is installed: no keys, no network, a real HTTP server on
loopback scripted per model. The one module of the product that imports `testing`.

One group of four routes, cheapest first, with a breaker, a budget and a deadline: the
explanation with each route's estimate, then one request per promise (the free on-device
model first, a failing vendor resting, a slow one cut by the deadline, the floor refusing a
vendor, the budget refusing before sending) and what was spent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from ..core.journey import Journey, Routed
from ..ground.errors import PolicyRouterError
from ..ground.reach import Reach
from ..ground.route import Route
from ..policies.breaker import Breaker
from ..policies.budget import Budget, Spending
from ..policies.order import Order
from ..policies.price_table import PriceTable
from ..router import Router
from ..testing import Fail, FakeProvider, Hang, Reply

__all__ = ["ASK", "TOOLS", "demo"]


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]

ASK = [{"role": "user", "content": "What should I wear in Oslo today?"}]

# Dollars per million tokens (input, output); the local model costs nothing.
_PRICES = {"local-llama": ("0", "0"), "vendor-a": ("0.15", "0.60"), "vendor-b": ("2.50", "10.00")}
_CAP = "0.01"
_DEADLINE = 1.0


def _router(fake: FakeProvider) -> Router:
    prices = PriceTable.from_dict(
        {
            "currency": "USD",
            "as_of": "2026-11-01",
            "source": "demo",
            "models": {f"openai/{m}": {"input": i, "output": o} for m, (i, o) in _PRICES.items()},
        }
    )

    def route(model: str, reach: Reach | None, **capabilities: bool) -> Route:
        return Route(
            f"openai/{model}",
            group="smart",
            api_base=fake.base_url,
            api_key=f"sk-demo-{model}",
            reach=reach,
            capabilities={"streaming": True, **capabilities},
            prices=prices,
        )

    return Router(
        [
            route("vendor-b", Reach.VENDOR, tools=True),
            route("vendor-a", Reach.VENDOR, tools=True),
            route("local-llama", None, tools=False),
        ],
        order=Order.CHEAPEST,
        breaker=Breaker(failures=2, cooldown=60),
        budget=Budget(_CAP),
    )


def _price_list(router: Router) -> str:
    """The routes as `order=CHEAPEST` ranks them: by price, each with its reach, its
    rates and what it can do (the router lists them as configured)."""

    def rates(route: Route) -> tuple[str, str]:
        return _PRICES[route.model.split("/", 1)[1]]

    ranked = sorted(router.routes, key=lambda r: sum(Decimal(x) for x in rates(r)))
    width = max(len(r.name) for r in ranked)
    reach = max(len(r.reach.value) for r in ranked) + 2
    lines = []
    for r in ranked:
        given, made = rates(r)
        can = ", ".join(sorted(router.capabilities(r.name) & {"tools", "streaming"}))
        lines.append(
            f"  {r.name:<{width}}  {'[' + r.reach.value + ']':<{reach}}  ${given} in, ${made} out per million "
            f"tokens; {can}"
        )
    return "\n".join(lines)


def demo(out: Callable[[str], None] = print) -> int:
    """Route one request per promise across three simulated providers and print the story."""
    with FakeProvider(default=Reply("Take a warm coat and an umbrella.")) as fake:
        # vendor-a is down for the whole demo; vendor-b hangs once, for the deadline to cut.
        fake.script("vendor-a", *[Fail(503, "upstream overloaded")] * 20)
        router = _router(fake)
        out(f"Routes on FakeProvider ({fake.base_url}), cheapest first, budget ${_CAP}:")
        out(_price_list(router))
        out("")
        out(str(router.explain(model="smart", messages=ASK, tools=TOOLS, max_tokens=200)))
        out("")

        def ask(**kw: Any) -> Callable[[], Routed[Any]]:
            return lambda: router.route(model="smart", messages=ASK, max_tokens=200, **kw)

        def slow() -> Routed[Any]:
            # The provider never answers; the attempt's own timeout (the deadline's length)
            # ends the abandoned call soon after, and it is charged its reservation then.
            fake.script("vendor-b", Hang(60.0, Reply("too late")))
            return router.route(
                model="smart", messages=ASK, tools=TOOLS, max_tokens=200, deadline=_DEADLINE
            )

        def ask_big() -> Routed[Any]:
            return router.route(model="smart", messages=ASK, tools=TOOLS, max_tokens=2000)

        def stream() -> Routed[Any]:
            routed = router.route(model="smart", messages=ASK, stream=True, max_tokens=200)
            for _ in routed.response:
                pass
            return Routed(routed.response, routed.route, routed.response.journey)

        cases: Sequence[tuple[str, Callable[[], Routed[Any]]]] = [
            ("plain chat (free first)", ask()),
            ("with tools", ask(tools=TOOLS)),
            ("with tools, again", ask(tools=TOOLS)),
            ("with tools, a-resting", ask(tools=TOOLS)),
            (f"deadline={_DEADLINE:g} s, b hangs", slow),
            ("stream=True", stream),
            ("async", lambda: asyncio.run(router.aroute(model="smart", messages=ASK))),
            ("on_device + tools", ask(tools=TOOLS, on_device=True)),
            ("max_tokens=2000", ask_big),
        ]
        rows = [("request", "answered by", "sent", "cost", "what fell through, and why")]
        for label, run in cases:
            try:
                routed = run()
                cost = str(routed.cost) if routed.cost is not None else "-"
                rows.append(
                    (label, routed.route.name, str(routed.attempts), cost, _why(routed.journey))
                )
            except Exception as error:  # the demo shows every refusal and failure alike
                journey: Journey | None = getattr(error, "journey", None)
                sent = len(journey.attempts) if journey else 0
                why = _why(journey) if journey else str(error)
                if not isinstance(error, PolicyRouterError) or not journey or why == "-":
                    why = str(error).split("\n")[0]
                rows.append((label, f"({type(error).__name__})", str(sent), "-", why))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        for row in rows:
            out("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])
        out("")
        spent = _settled(router)
        resting = ", ".join(f"{n} ({s:.0f} s left)" for n, s in router.resting().items())
        out(f"Spent {spent.spent} of {spent.cap} in {spent.calls} calls; resting: {resting or '-'}")
        out(
            "  (the call the deadline cut is among them, charged its reservation: the provider "
            "had it and may bill it)"
        )
        out(
            f"FakeProvider received {fake.requests()} requests: "
            + ", ".join(f"{m} {fake.requests(m)}" for m in _PRICES)
            + " (the sent column, to the request)"
        )
    return 0


def _settled(router: Router, patience: float = 20.0) -> Spending:
    """The spending once no call is in flight (the one the deadline abandoned ends at its
    own timeout), or as it stands after `patience` seconds."""
    ends = time.monotonic() + patience
    spent = router.spending()
    while spent.in_flight and time.monotonic() < ends:
        time.sleep(0.05)
        spent = router.spending()
    return spent


def _why(journey: Journey) -> str:
    parts = [f"{s.route}: {s.reason}" for s in journey.skips]
    parts += [
        f"{a.route}: {a.status or ''} {a.outcome.replace('_', ' ')}".replace("  ", " ")
        for a in journey.attempts
        if not a.ok
    ]
    return "; ".join(parts) or "-"
