"""`policy-router demo|check|diff|explain|prices|report|metrics` (or `python -m policy_router`).

`demo` runs the router on an embedded FakeProvider, no keys needed; `check`, `diff`,
`explain` and `prices` read a policy file (or a LiteLLM proxy config) and send nothing
(unless `check --preflight`); `diff OLD NEW` says what `Router.reload()` would change
(exit 1 when anything would); `report` reads an attempt log or a metrics store; `metrics`
creates, inspects and migrates a metrics store's schema. Exit codes: 0 ok, 1 problems found, 2 a usage or configuration error
(said in one line on stderr, never a traceback), 130 interrupted.

Set `LITELLM_LOCAL_MODEL_COST_MAP=True` in the environment (as `make demo` does) so that
LiteLLM's import does not try to download its price map.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..config.changes import diff
from ..config.policy_file import load as config_load
from ..ground.errors import ConfigError, PolicyRouterError
from ..router import Router
from .demo import TOOLS, demo


def _build(path: str) -> tuple[Router, list[str]]:
    loaded = config_load(path)
    router = Router(loaded.routes, **loaded.policies)
    router._life.notes = tuple(loaded.notes)  # what check() lists first
    return router, loaded.missing


def spend(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    """Every budget scope's account in its period now, read from the store the file names
    (or the server's state file beside it): what `GET /v1/spend` shows an admin."""
    from ..config.policy_file import load
    from ..router import Router
    from ..server.admin import shown
    from ..server.tenants import budgets_of, store_of

    if not Path(args.config).is_file():
        raise ConfigError(f"{args.config}: no such file")
    loaded = load(args.config)
    store = store_of(loaded)
    policies = {k: v for k, v in loaded.policies.items() if k not in ("metrics", "observers")}
    router = Router(loaded.routes, **{**policies, "store": store, "budgets": budgets_of(loaded)})
    try:
        rows = router.budgets()
    finally:
        router.close()
        close = getattr(store, "close", None)
        if close is not None:
            close()
    if args.json:
        out(json.dumps([shown(r) for r in rows], indent=2))
        return 0
    if not rows:
        out("no budgets: the file names no budget: and no budgets:")
        return 0
    head = ("scope", "period", "resets at (UTC)", "spent", "reserved", "cap", "left", "calls")
    table = [head] + [
        (
            r.scope, r.period or "-", f"{r.resets_at:%Y-%m-%d %H:%M}" if r.resets_at else "-",
            str(r.spent), str(r.reserved), str(r.cap), str(r.left), str(r.calls),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for row in table:
        out("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


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


def diff_cmd(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    """What going from one config to another changes, as `reconfigure` reports it; exit 1
    when anything changes. Nothing is sent, no router is built."""
    for path in (args.old, args.new):
        if not Path(path).is_file():
            raise ConfigError(f"{path}: no such file")
    old, new = (config_load(path) for path in (args.old, args.new))
    found = diff(
        old.routes, old.policies.get("order", "as_listed"),
        new.routes, new.policies.get("order", "as_listed"),
    )
    out(json.dumps(asdict(found), indent=2) if args.json else str(found))
    return 1 if found.changed else 0


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

    report = _metrics_report(args) if _is_metrics(args.log) else read(args.log, _since(args.since))
    out(json.dumps(report.to_dict(), indent=2) if args.json else str(report))
    return 0


def _is_metrics(target: str) -> bool:
    if target.startswith(("postgresql://", "postgres://", "duckdb:", "os.environ/")) or target.endswith(".duckdb"):
        return True
    import sqlite3

    path = Path(target.removeprefix("sqlite:"))
    if not path.is_file():
        return False
    try:
        with sqlite3.connect(path) as db:
            found = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'policy_router_attempts'")
            return bool(found.fetchone())
    except sqlite3.DatabaseError:
        return False  # not SQLite at all: the attempt log's reader says so


def _metrics_report(args: argparse.Namespace) -> Any:
    from ..observe.metrics.report import report_of, since_cutoff
    from .metrics import target

    store = target(args.log)
    try:
        since = _since(args.since)
        rows = store.read(args.scope, since_cutoff(since))
    finally:
        store.close()
    return report_of(rows, [], source=store.target + (f" ({args.scope})" if args.scope else ""), since=since)


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
    """The command line: `policy-router demo|serve|spend|check|diff|explain|prices|report|metrics`."""
    parser = argparse.ArgumentParser(prog="policy-router", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="route a few requests on an embedded FakeProvider")
    p_check = commands.add_parser("check", help="list what is wrong with a config; exit 1 if any")
    p_check.add_argument("config", help="a policy file or a LiteLLM proxy config (YAML or TOML)")
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
    p_diff = commands.add_parser(
        "diff", help="what changes from one config to another (as reload() would); exit 1 if any"
    )
    p_diff.add_argument("old", help="the config in use (policy file or LiteLLM proxy config)")
    p_diff.add_argument("new", help="the config to compare it with")
    p_explain = commands.add_parser("explain", help="every route's verdict; nothing sent")
    p_explain.add_argument("config", help="a policy file or a LiteLLM proxy config (YAML or TOML)")
    p_explain.add_argument("--model", required=True, help="the group to explain")
    p_explain.add_argument("--tools", action="store_true", help="the request carries tools")
    p_explain.add_argument("--images", action="store_true", help="the request carries images")
    p_explain.add_argument(
        "--on-device", action="store_true", help="the request is on-device only (the floor)"
    )
    p_explain.add_argument(
        "--prompt-tokens", type=int, default=100, help="the prompt's size for the estimates"
    )
    p_explain.add_argument(
        "--max-tokens", type=int, default=None, help="the reply cap the request would set"
    )
    commands.add_parser(
        "metrics",
        help="a metrics store's schema: create, inspect or migrate TARGET "
        "(`policy-router metrics --help`)",
    )
    commands.add_parser(
        "prices",
        help="price tables: the rows in use [CONFIG], show [MODEL], import litellm MODEL..., "
        "diff OLD NEW (`policy-router prices --help`)",
    )
    p_report = commands.add_parser(
        "report", help="per-route requests, success, latency, cost and reasons from a log"
    )
    p_report.add_argument(
        "log", help="an attempt log (AttemptLog's SQLite file) or a metrics store TARGET"
    )
    p_report.add_argument("--scope", default=None, help="a metrics store's scope (default: all)")
    p_report.add_argument(
        "--since", default="1h", help="the window: 90s, 30m, 24h, 7d, or all (default 1h)"
    )
    p_spend = commands.add_parser(
        "spend", help="every budget scope's spending in its period, from CONFIG's store"
    )
    p_spend.add_argument("config", help="a policy file (its store:, or the server's state beside it)")
    p_serve = commands.add_parser(
        "serve", help="serve CONFIG as an OpenAI-compatible API (needs the server extra)"
    )
    p_serve.add_argument("config", nargs="?", help="a policy file, with its server.keys (or POLICY_ROUTER_API_KEY set)")
    p_serve.add_argument(
        "--demo", action="store_true",
        help="serve the demo's routes on an embedded FakeProvider with a printed key: no file, no provider key",
    )
    p_serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    p_serve.add_argument("--port", type=int, default=8000, help="the port (default 8000)")
    p_serve.add_argument(
        "--workers", type=int, default=None,
        help="worker processes (default: one per core when the file names a shared store:, else 1)",
    )
    for p in (p_check, p_diff, p_explain, p_report, p_spend):
        p.add_argument("--json", action="store_true", help="machine-readable output")
    argv = list(sys.argv[1:] if argv is None else argv)
    # A warning about the user's file (a literal key) is one line, not a source excerpt.
    warnings.showwarning = lambda message, *_, **__: print(f"warning: {message}", file=sys.stderr)
    try:
        if argv[:1] == ["metrics"]:
            from .metrics import run as metrics

            return metrics(argv[1:], print)
        if argv[:1] == ["prices"]:
            # `prices` has verbs of its own (show, import, diff), parsed by `cli.prices`.
            from .prices import run

            return run(argv[1:], print)
        args = parser.parse_args(argv)
        if args.command == "demo":
            return demo()
        if args.command == "serve" and args.demo:
            if args.config is not None:
                raise ConfigError("serve --demo serves the demo's own routes: leave out the policy file, or --demo")
            from .serve_demo import serve_demo

            serve_demo(args.host, args.port, lambda text: print(text, file=sys.stderr, flush=True), workers=args.workers)
            return 0
        if args.command == "serve":
            from ..server import serve

            if args.config is None:
                raise ConfigError("serve needs a policy file (policy-router serve policy.yaml), or --demo to try it without one")
            serve(
                args.config, host=args.host, port=args.port, workers=args.workers,
                on_ready=lambda url: print(f"policy-router: serving {args.config} on {url}", file=sys.stderr, flush=True),
            )
            return 0
        handler = {
            "spend": spend,
            "check": check,
            "diff": diff_cmd,
            "explain": explain_cmd,
            "report": report_cmd,
        }[args.command]
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

