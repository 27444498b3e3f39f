"""How a router reads at a glance: a table in Jupyter, a few lines in a terminal."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from ..ground.money import Money
from ..policies.candidate import Candidate
from ..state.store import Health

__all__ = ["as_html", "as_text"]


def _price(c: Candidate) -> str:
    if c.price is None or c.route.prices is None:
        return "unpriced"
    cur = c.route.prices.currency
    return f"{Money(c.price.input, cur)} / {Money(c.price.output, cur)} per M tokens"


def as_html(groups: Mapping[str, Sequence[Candidate]], health: Mapping[str, Health]) -> str:
    """Each route with its reach, capabilities, price and health, as an HTML table."""
    rows = []
    for group, cs in groups.items():
        for c in cs:
            h = health.get(c.name, Health())
            cells = (
                group,
                c.name,
                c.route.reach.value,
                c.capabilities.describe(),
                _price(c),
                f"{h.state} ({h.failures} failures)" if h.failures else h.state,
            )
            rows.append("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in cells) + "</tr>")
    head = "".join(
        f"<th>{h}</th>" for h in ("group", "route", "reach", "can do", "price in/out", "health")
    )
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def as_text(groups: Mapping[str, Sequence[Candidate]]) -> str:
    """The routes by group, each with its reach and what it can do."""
    count = sum(len(cs) for cs in groups.values())
    lines = [f"Router({count} routes in {len(groups)} groups)"]
    for group, cs in groups.items():
        lines.append(f"  {group}:")
        lines.extend(
            f"    {c.name}  [{c.route.reach.value}]  {c.capabilities.describe()}" for c in cs
        )
    return "\n".join(lines)
