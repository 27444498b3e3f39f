"""`policy-router prices ...`: the rows in use, every rate of a row, an import from LiteLLM's
map, and a diff of two tables.

    policy-router prices [CONFIG]                  rows in use (the shipped table without one)
    policy-router prices show [MODEL] [--config CONFIG]
    policy-router prices import litellm MODEL... [--provider P] --as-of DATE --out FILE
    policy-router prices diff OLD NEW              exit 1 when anything changed
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..ground.errors import ConfigError
from ..ground.money import MICROS, Money
from ..policies.price_table import PriceTable

__all__ = ["run"]

Out = Callable[[str], None]


def _tables(config: str | None) -> list[PriceTable]:
    """The shipped table, or each table a config's routes use, each with only the rows
    for the models those routes route to (a table named twice is listed once)."""
    if not config:
        return [PriceTable.default()]
    from ..config.policy_file import load

    loaded = load(config)
    used: dict[str, tuple[PriceTable, dict[str, Any]]] = {}
    for route in loaded.routes:
        table = route.prices
        if table is None:
            continue
        key = f"{table.name}|{table.currency}|{table.as_of}"
        _, rows = used.setdefault(key, (table, {}))
        price = table.price_for(route.model)
        if price is not None:
            rows[route.model] = price
    return [
        PriceTable(t.currency, t.as_of, t.source, rows, name=t.name)
        for t, rows in used.values()
    ]


def _rows(tables: Sequence[PriceTable], model: str | None = None) -> list[dict[str, Any]]:
    rows = [
        {
            "table": t.name,
            "model": m,
            "currency": t.currency,
            "rates": {k: format((Decimal(v) / MICROS).normalize(), "f") for k, v in p.rates().items()},
            "long_above": p.long_above,
            "as_of": t.row_as_of(m).isoformat(),
            "source": p.source or t.source,
        }
        for t in tables
        for m, p in t.rows.items()
        if model is None or m == model
    ]
    if model is not None and not rows:
        known = sorted({m for t in tables for m in t.rows})
        import difflib

        close = difflib.get_close_matches(model, known, n=5)
        raise ConfigError(
            f"no price row for {model!r}" + (f"; close: {', '.join(close)}" if close else "")
        )
    return rows


def listing(args: argparse.Namespace, out: Out) -> int:
    """The rows in use, input and output per million, with as-of and source."""
    rows = _rows(_tables(args.config))
    if args.json:
        out(json.dumps(rows, indent=2))
        return 0
    out("per million tokens")
    shown = [
        {
            "model": r["model"],
            "input": str(Money.parse(r["rates"]["input"], r["currency"])),
            "output": str(Money.parse(r["rates"]["output"], r["currency"])),
            "as_of": r["as_of"],
            "source": r["source"],
        }
        for r in rows
    ]
    header = {
        "model": "model",
        "input": "input",
        "output": "output",
        "as_of": "as of",
        "source": "source",
    }
    width = {k: max(len(str(r[k])) for r in [header, *shown]) for k in ("model", "input", "output")}
    for r in [header, *shown]:
        out(
            f"{r['model']:<{width['model']}}  {r['input']:>{width['input']}}  "
            f"{r['output']:>{width['output']}}  {r['as_of']:<10}  {r['source']}"
        )
    return 0


def show(args: argparse.Namespace, out: Out) -> int:
    """Every rate of a row (or of every row), its as-of and its source."""
    rows = _rows(_tables(args.config), args.model)
    if args.json:
        out(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        out(f"{r['model']}  ({r['table']}, {r['currency']} per million tokens)")
        for name, value in r["rates"].items():
            out(f"  {name:<20} {value}")
        if r["long_above"] is not None:
            out(f"  {'long_above':<20} {r['long_above']} prompt tokens")
        out(f"  {'as of':<20} {r['as_of']}")
        out(f"  {'source':<20} {r['source']}")
    return 0


def import_(args: argparse.Namespace, out: Out) -> int:
    """Write a dated table from LiteLLM's map; refuse a model it does not know."""
    from ..config.price_tools import import_litellm, write

    if args.source != "litellm":
        raise ConfigError(f"prices import: the only source is 'litellm', got {args.source!r}")
    try:
        as_of = dt.date.fromisoformat(args.as_of)
    except ValueError:
        raise ConfigError(f'--as-of must be a date like "2026-11-30", got {args.as_of!r}') from None
    table = import_litellm(args.models, as_of=as_of, provider=args.provider)
    header = [
        f"Imported from {table.source} on {as_of.isoformat()} by `policy-router prices import`.",
        "Rates are USD per million tokens, exact decimals of LiteLLM's per-token figures.",
        "Review it with `policy-router prices diff OLD NEW` before you commit it.",
    ]
    write(table, Path(args.out), header)
    out(f"wrote {len(table.rows)} rows to {args.out} ({table.source}, as of {as_of})")
    return 0


def diff_(args: argparse.Namespace, out: Out) -> int:
    """What moved between two tables; exit 1 when anything did."""
    from ..config.price_tools import diff

    result = diff(PriceTable.load(args.old), PriceTable.load(args.new))
    if args.json:
        out(
            json.dumps(
                {
                    "changed": [
                        {"model": c.model, "rate": c.rate, "old": c.old, "new": c.new}
                        for c in result.changes
                    ],
                    "added": list(result.added),
                    "removed": list(result.removed),
                    "unchanged": result.unchanged,
                },
                indent=2,
            )
        )
    else:
        out("\n".join(result.lines()))
    return 1 if result.changed else 0


def run(argv: Sequence[str], out: Out) -> int:
    """Parse and run one `prices` verb (see the module docstring)."""
    verbs = {"show", "import", "diff"}
    parser = argparse.ArgumentParser(
        prog="policy-router prices",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if argv and argv[0] in verbs:
        sub = parser.add_subparsers(dest="verb", required=True)
        p_show = sub.add_parser("show", help="every rate of a row, with as-of and source")
        p_show.add_argument("model", nargs="?", help="the row to show (every row without one)")
        p_show.add_argument("--config", default=None, help="read the tables this config uses")
        p_import = sub.add_parser("import", help="write a dated table from LiteLLM's map")
        p_import.add_argument("source", help="litellm")
        p_import.add_argument(
            "models", nargs="+", metavar="MODEL", help="LiteLLM model strings to import"
        )
        p_import.add_argument(
            "--provider", default=None, help="the provider to check each row against"
        )
        p_import.add_argument(
            "--as-of", required=True, help="the date the rates were true (YYYY-MM-DD)"
        )
        p_import.add_argument("--out", required=True, help="the TOML file to write")
        p_diff = sub.add_parser("diff", help="what changed between two tables; exit 1 if any")
        p_diff.add_argument("old", help="the table in use")
        p_diff.add_argument("new", help="the table to compare it with")
        for p in (p_show, p_import, p_diff):
            p.add_argument("--json", action="store_true", help="machine-readable output")
        args = parser.parse_args(argv)
        handler = {"show": show, "import": import_, "diff": diff_}[args.verb]
        return handler(args, out)
    parser.add_argument(
        "config", nargs="?", help="list the rows this config's routes use (else the shipped table)"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    return listing(parser.parse_args(argv), out)
