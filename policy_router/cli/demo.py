"""`policy-router demo`: the router's promises, shown on an embedded FakeProvider.

Runs where nothing but Python is installed: no keys, no network, a real HTTP server on
loopback scripted per model. The one module of the product that imports `testing`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from ..core.journey import Journey, Routed
from ..ground.errors import PolicyRouterError
from ..ground.reach import Reach
from ..ground.route import Route
from ..router import Router
from ..testing import Fail, FakeProvider, Reply

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



def demo(out: Callable[[str], None] = print) -> int:
    """Route a handful of requests across three simulated providers and print a table."""
    with FakeProvider(default=Reply("Take a warm coat and an umbrella.")) as fake:
        # vendor-a is down for the whole demo: every request it gets answers 503.
        fake.script("vendor-a", *[Fail(503, "upstream overloaded")] * 20)
        router = Router(
            [
                Route(
                    "openai/vendor-a",
                    group="smart",
                    api_base=fake.base_url,
                    api_key="sk-demo-a",
                    reach=Reach.VENDOR,
                    capabilities={"tools": True, "streaming": True},
                ),
                Route(
                    "openai/vendor-b",
                    group="smart",
                    api_base=fake.base_url,
                    api_key="sk-demo-b",
                    reach=Reach.VENDOR,
                    capabilities={"streaming": True},
                ),
                Route(
                    "openai/local-llama",
                    group="smart",
                    api_base=fake.base_url,
                    api_key="sk-demo-local",
                    capabilities={"tools": True, "streaming": True},
                ),
            ]
        )
        out("Routes (FakeProvider on " + fake.base_url + "):")
        out("\n".join("  " + line for line in repr(router).splitlines()[1:]))
        out("")
        out(str(router.explain(model="smart", messages=ASK, tools=TOOLS)))
        out("")

        def stream() -> Routed[Any]:
            routed = router.route(model="smart", messages=ASK, stream=True)
            for _ in routed.response:
                pass
            return Routed(routed.response, routed.route, routed.response.journey)

        cases: Sequence[tuple[str, Callable[[], Routed[Any]]]] = [
            ("plain chat", lambda: router.route(model="smart", messages=ASK)),
            ("with tools", lambda: router.route(model="smart", messages=ASK, tools=TOOLS)),
            ("on_device=True", lambda: router.route(model="smart", messages=ASK, on_device=True)),
            ("stream=True", stream),
            ("async", lambda: asyncio.run(router.aroute(model="smart", messages=ASK))),
            ("needs images", lambda: router.route(model="smart", messages=ASK, needs={"images"})),
        ]
        rows = [("request", "answered by", "sent", "what fell through, and why")]
        for label, run in cases:
            try:
                routed = run()
                rows.append((label, routed.route.name, str(routed.attempts), _why(routed.journey)))
            except PolicyRouterError as error:
                journey = error.journey
                rows.append(
                    (
                        label,
                        f"({type(error).__name__})",
                        "0",
                        _why(journey) if journey else str(error),
                    )
                )
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        for row in rows:
            out("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3])
        out("")
        out(
            f"FakeProvider received {fake.requests()} requests: "
            + ", ".join(f"{m} {fake.requests(m)}" for m in ("vendor-a", "vendor-b", "local-llama"))
        )
    return 0



def _why(journey: Journey) -> str:
    parts = [f"{s.route}: {s.reason}" for s in journey.skips]
    parts += [
        f"{a.route}: {a.status or ''} {a.outcome.replace('_', ' ')}".replace("  ", " ")
        for a in journey.attempts
        if not a.ok
    ]
    return "; ".join(parts) or "-"
