"""`policy-router demo|check|explain|prices|report` (or `python -m policy_router ...`).

`demo` runs the router on an embedded FakeProvider, no keys needed; `check`, `explain` and
`prices` read a policy file (or a LiteLLM proxy config) and send nothing (unless
`check --preflight`); `report` reads an attempt log. Exit codes: 0 ok, 1 problems found, 2 a usage or configuration error
(said in one line on stderr, never a traceback), 130 interrupted.

Set `LITELLM_LOCAL_MODEL_COST_MAP=True` in the environment (as `make demo` does) so that
LiteLLM's import does not try to download its price map.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..config.policy_file import load as config_load
from ..core.journey import Journey, Routed
from ..ground.errors import ConfigError, PolicyRouterError
from ..ground.reach import Reach
from ..ground.route import Route
from ..router import Router
from ..testing import Fail, FakeProvider, Reply

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


def _build(path: str) -> tuple[Router, list[str]]:
    loaded = config_load(path)
    router = Router(loaded.routes, **loaded.policies)
    router._notes = tuple(loaded.notes)
    return router, loaded.missing


def check(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    """Every problem with a config, nothing sent; exit 1 when there is one (2 when there
    is no file to check)."""
    if not Path(args.config).is_file():
        raise ConfigError(f"{args.config}: no such file to check")
    try:
        router, problems = _build(args.config)
    except ConfigError as error:
        problems, router = [str(error)], None
    if router is not None:
        problems += router.check(max_age_days=args.max_age)
        if args.preflight:
            problems += [
                f"{name}: {verdict}"
                for name, verdict in router.preflight(live=True).items()
                if verdict.state != "ready"
            ]
    routes = (
        [
            {"route": r.name, "group": r.group, "reach": r.reach.value, "how": r.reach_reason}
            for r in router.routes
        ]
        if router is not None
        else []
    )
    if args.json:
        out(json.dumps({"ok": not problems, "problems": problems, "routes": routes}, indent=2))
        return 1 if problems else 0
    if problems:
        out(f"{args.config}: {len(problems)} problem{'s' * (len(problems) != 1)}")
        out("\n".join(f"  - {p}" for p in problems))
    else:
        out(f"{args.config}: no problems found")
    if routes:
        width = max(len(r["route"]) for r in routes)
        out("routes (reach, and how it was decided):")
        out("\n".join(f"  {r['route']:<{width}}  {r['reach']:<9}  {r['how']}" for r in routes))
    if router is not None:
        tables = {id(r.prices): r.prices for r in router.routes if r.prices is not None}
        if tables:
            out("price tables:")
            for t in tables.values():
                out(f"  {t.name}: as of {t.as_of.isoformat()}, {t.source}")
    return 1 if problems else 0


def explain_cmd(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    """The verdict for every route of a group for a described request; nothing sent."""
    router, _ = _build(args.config)
    content: Any = "x " * max(args.prompt_tokens, 1)
    if args.images:
        content = [
            {"type": "text", "text": content},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ]
    kwargs: dict[str, Any] = {"messages": [{"role": "user", "content": content}]}
    if args.tools:
        kwargs["tools"] = TOOLS
    if args.max_tokens:
        kwargs["max_tokens"] = args.max_tokens
    if args.on_device:
        kwargs["on_device"] = True
    explanation = router.explain(model=args.model, **kwargs)
    if args.json:
        out(
            json.dumps(
                {
                    "group": explanation.group,
                    "needs": explanation.requirements.describe(),
                    "verdicts": [
                        {
                            "route": v.route,
                            "position": v.position,
                            "check": v.check.value if v.check else None,
                            "reason": v.reason,
                        }
                        for v in explanation.verdicts
                    ],
                },
                indent=2,
            )
        )
    else:
        out(str(explanation))
    return 0


def report_cmd(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    """Per route over a window: requests, success rate, p50/p95, cost, top reasons."""
    from ..observe.report import read

    report = read(args.log, _since(args.since))
    out(json.dumps(report.to_dict(), indent=2) if args.json else str(report))
    return 0


def _since(text: str) -> float | None:
    """`90`, `90s`, `30m`, `24h`, `7d` as seconds; `all` as None."""
    if text == "all":
        return None
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = (text[:-1], text[-1]) if text[-1:] in units else (text, "s")
    try:
        seconds = float(number) * units[unit]
    except ValueError:
        raise ConfigError(
            f"--since must be a duration like 90s, 30m, 24h, 7d or all, got {text!r}"
        ) from None
    if not seconds > 0:
        raise ConfigError(f"--since must be more than zero, got {text!r}")
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: `policy-router demo|check|explain|prices|report`."""
    parser = argparse.ArgumentParser(prog="policy-router", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="route a few requests on an embedded FakeProvider")
    p_check = commands.add_parser("check", help="list what is wrong with a config; exit 1 if any")
    p_check.add_argument("config")
    p_check.add_argument(
        "--max-age",
        type=int,
        default=None,
        metavar="DAYS",
        help="report price tables older than this many days",
    )
    p_check.add_argument(
        "--preflight", action="store_true", help="also send each route a one-token request"
    )
    p_explain = commands.add_parser("explain", help="every route's verdict; nothing sent")
    p_explain.add_argument("config")
    p_explain.add_argument("--model", required=True, help="the group to explain")
    p_explain.add_argument("--tools", action="store_true")
    p_explain.add_argument("--images", action="store_true")
    p_explain.add_argument("--on-device", action="store_true")
    p_explain.add_argument("--prompt-tokens", type=int, default=100)
    p_explain.add_argument("--max-tokens", type=int, default=None)
    commands.add_parser(
        "prices",
        help="price tables: the rows in use [CONFIG], show [MODEL], import litellm MODEL..., "
        "diff OLD NEW (`policy-router prices --help`)",
    )
    p_report = commands.add_parser(
        "report", help="per-route requests, success, latency, cost and reasons from a log"
    )
    p_report.add_argument("log", help="an attempt log (AttemptLog's SQLite file)")
    p_report.add_argument(
        "--since", default="1h", help="the window: 90s, 30m, 24h, 7d, or all (default 1h)"
    )
    for p in (p_check, p_explain, p_report):
        p.add_argument("--json", action="store_true", help="machine-readable output")
    argv = list(sys.argv[1:] if argv is None else argv)
    # A warning about the user's file (a literal key) is one line, not a source excerpt.
    warnings.showwarning = lambda message, *_, **__: print(f"warning: {message}", file=sys.stderr)
    try:
        if argv[:1] == ["prices"]:
            # `prices` has verbs of its own (show, import, diff), parsed by cli_prices.
            from .prices import run

            return run(argv[1:], print)
        args = parser.parse_args(argv)
        if args.command == "demo":
            return demo()
        handler = {"check": check, "explain": explain_cmd, "report": report_cmd}[args.command]
        return handler(args, print)
    except PolicyRouterError as error:
        # A user's mistake (a bad file, a group that does not exist): one line, no trace.
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`prices | head`): stop quietly, and keep Python from
        # failing again when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0

