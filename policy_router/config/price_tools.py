"""Price tables as maintained data: imported from LiteLLM's map, written as a reviewable TOML
file, compared row by row.

The workflow: `policy-router prices import litellm MODEL... --as-of DATE --out new.toml`
writes a dated table from the LiteLLM release installed here; `policy-router prices diff
old.toml new.toml` shows every rate that moved (exit 1 when anything did, so a CI job can
gate on it); a person reviews the diff and commits the new file.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from ..ground import catalog
from ..ground.money import MICROS
from ..policies.price_table import PriceTable
from ..policies.prices import RATES, TIERS, Price

__all__ = ["Change", "Diff", "diff", "import_litellm", "to_toml"]


def import_litellm(
    models: Iterable[str], *, as_of: dt.date | str, provider: str | None = None
) -> PriceTable:
    """A table of `models` from LiteLLM's bundled map, every rate exact, dated `as_of`.

    `provider` is checked for every model (see `catalog.cost_map_entry`); a model the map
    does not know raises `ConfigError` naming close matches. The table's `source` names
    the LiteLLM version the rates came from.
    """

    rows: dict[str, Price] = {}
    for model in models:
        key, entry = catalog.cost_map_entry(model, provider)
        rows[key] = Price.from_litellm(entry, f"litellm cost map: {key}")
    return PriceTable(
        "USD",
        as_of,
        f"litellm {catalog.litellm_version()} model_cost map",
        rows,
        name="litellm",
    )


def _rate(micros: int) -> str:
    # Plain positional digits ("10", "0.075"), never an exponent ("1E+1").
    return format((Decimal(micros) / MICROS).normalize(), "f")


def to_toml(table: PriceTable, header: Sequence[str] = ()) -> str:
    """The table in the file format (DESIGN §7): exact decimal strings, one row a section."""
    lines = [f"# {line}" if line else "#" for line in header]
    if lines:
        lines.append("")
    lines += [
        f'currency = "{table.currency}"',
        f'as_of = "{table.as_of.isoformat()}"',
        f'source = "{table.source}"',
    ]
    for model, price in table.rows.items():
        lines += ["", f'[models."{model}"]']
        rates = price.rates()
        for name in (n for n in RATES if n in rates and not n.startswith("long_")):
            lines.append(f'{name} = "{_rate(rates[name])}"')
        if price.long_above is not None:  # the threshold first, then the rates it opens
            lines.append(f"long_above = {price.long_above}")
            lines += [
                f'{n} = "{_rate(rates[n])}"' for n in RATES if n.startswith("long_") and n in rates
            ]
        if price.as_of is not None:
            lines.append(f'as_of = "{price.as_of.isoformat()}"')
        if price.source is not None:
            lines.append(f'source = "{price.source}"')
        for tier, priced in price.tiers.items():
            # A tier's own rates only: what it does not set is the row's.
            own = {n: r for n, r in priced.rates().items() if rates.get(n) != r}
            lines += ["", f'[models."{model}".{tier}]']
            lines += [f'{n} = "{_rate(r)}"' for n, r in own.items()]
    return "\n".join(lines) + "\n"


@dataclass(kw_only=True, frozen=True, slots=True)
class Change:
    """One rate of one model that differs between two tables (None: not set)."""

    model: str
    rate: str
    old: int | None
    new: int | None

    def __str__(self) -> str:
        shown = str if self.rate == "long_above" else _rate  # a token count, not a rate
        old = "-" if self.old is None else shown(self.old)
        new = "-" if self.new is None else shown(self.new)
        if self.old and self.new is not None:
            pct = (self.new - self.old) * 100 / self.old
            way = "up" if self.new > self.old else "down"
            return f"{self.rate} {old} -> {new} ({way} {abs(pct):.1f}%)"
        return f"{self.rate} {old} -> {new}"


@dataclass(kw_only=True, frozen=True, slots=True)
class Diff:
    """What moved between two tables: changed rates, models added and removed, and how
    many rows stayed the same."""

    changes: tuple[Change, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    unchanged: int

    @property
    def changed(self) -> bool:
        return bool(self.changes or self.added or self.removed)

    def lines(self) -> list[str]:
        out: list[str] = []
        for model in dict.fromkeys(c.model for c in self.changes):
            out.append(
                f"changed {model}: " + "; ".join(str(c) for c in self.changes if c.model == model)
            )
        out += [f"added   {m}" for m in self.added]
        out += [f"removed {m}" for m in self.removed]
        out.append(
            f"{len({c.model for c in self.changes})} changed, {len(self.added)} added, "
            f"{len(self.removed)} removed, {self.unchanged} unchanged"
        )
        return out


def diff(old: PriceTable, new: PriceTable) -> Diff:
    """Every rate (and long-context threshold) that differs, model by model."""
    fields = (*RATES, "long_above", *(f"{t}.{r}" for t in TIERS for r in RATES))
    changes: list[Change] = []
    unchanged = 0
    for model in old.rows.keys() & new.rows.keys():
        a, b = old.rows[model], new.rows[model]
        moved = [
            Change(model=model, rate=f, old=_field(a, f), new=_field(b, f))
            for f in fields
            if _field(a, f) != _field(b, f)
        ]
        changes += moved
        unchanged += not moved
    order = {m: i for i, m in enumerate([*old.rows, *new.rows])}
    changes.sort(key=lambda c: (order[c.model], fields.index(c.rate)))
    return Diff(
        changes=tuple(changes),
        added=tuple(m for m in new.rows if m not in old.rows),
        removed=tuple(m for m in old.rows if m not in new.rows),
        unchanged=unchanged,
    )


def _field(price: Price, name: str) -> int | None:
    """A rate of the row, or of one of its tiers (`priority.input`)."""
    tier, _, rate = name.rpartition(".")
    if tier:
        priced = price.tiers.get(tier)
        return None if priced is None else getattr(priced, rate)
    value: int | None = getattr(price, rate)
    return value


def write(table: PriceTable, path: Path, header: Sequence[str] = ()) -> None:
    path.write_text(to_toml(table, header), encoding="utf-8")
