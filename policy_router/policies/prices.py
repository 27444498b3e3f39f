"""A model's price: integer micro-units per *million* tokens, for every rate a bill has.

Rates are parsed from decimal strings, never floats; a cost is rounded *up* to the
micro-unit, so a bill computed here is never below the true one (money itself is
`ground.money`; dated tables of prices are `price_table`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import replace
from decimal import Decimal
from typing import Any

from ..ground.errors import ConfigError
from ..ground.money import MICROS, Usage, _ceil_div, _micros

__all__ = ["RATES", "Price"]


# The rate fields of a row, in the file format's order.
RATES = (
    "input",
    "output",
    "cache_read",
    "cache_write",
    "cache_write_1h",
    "reasoning",
    "input_audio",
    "output_audio",
    "cache_read_audio",
    "input_image",
    "output_image",
    "long_input",
    "long_output",
    "long_cache_read",
    "long_cache_write",
    "long_cache_write_1h",
)
TIERS = ("priority", "flex")
"""Service tiers a row may price apart (`service_tier="priority"` or `"flex"` at OpenAI),
each a sub-row of the same rate fields; a rate it does not set is the row's own."""
_ROW_KEYS = (*RATES, "long_above", "as_of", "source", *TIERS)
_LONG = ("long_input", "long_output", "long_cache_read", "long_cache_write", "long_cache_write_1h")
# Rates of tokens of a kind (audio, images) that fall back to the plain rate of their side.
_PROMPT_KINDS = ("input_audio", "cache_read_audio", "input_image")
_REPLY_KINDS = ("output_audio", "output_image")


class Price:
    """One model's rates, in micro-units of the table's currency per million tokens.

    `Price(input="0.15", output="0.60", cache_read="0.075")`. Optional rates: `cache_read`
    (cached prompt tokens), `cache_write` (tokens written to a prompt cache; five minutes at
    Anthropic), `cache_write_1h` (written to a one-hour cache), `reasoning` (reasoning
    tokens, when billed apart from output), and a long-context tier: a prompt over
    `long_above` tokens is billed at the `long_*` rates (`long_input`, `long_output`,
    `long_cache_read`, `long_cache_write`, `long_cache_write_1h`). Audio and image tokens
    have rates of their own where a model bills them apart (`input_audio`, `output_audio`,
    `cache_read_audio`, `input_image`, `output_image`), and a service tier may be priced
    apart (`priority={...}`, `flex={...}`: sub-rows whose missing rates are this row's). A
    missing rate falls back to the one it refines: a cache rate to input, reasoning to
    output, an audio or image rate to its side's plain rate, a long rate to its short twin.
    `as_of` and `source` may override the table's for this row.

    The worst case of a call (`worst_case`) prices every prompt token at the highest rate
    any prompt token of this row can have, in any tier, and every reply token likewise, so
    no bill the row can produce exceeds it.
    """

    __slots__ = (*RATES, "_worst", "as_of", "long_above", "source", "tiers")

    input: int
    output: int
    cache_read: int | None
    cache_write: int | None
    cache_write_1h: int | None
    reasoning: int | None
    input_audio: int | None
    output_audio: int | None
    cache_read_audio: int | None
    input_image: int | None
    output_image: int | None
    long_above: int | None
    long_input: int | None
    long_output: int | None
    long_cache_read: int | None
    long_cache_write: int | None
    long_cache_write_1h: int | None
    as_of: dt.date | None
    source: str | None
    tiers: Mapping[str, Price]
    _worst: tuple[int, int]

    def __init__(
        self,
        input: str | int | Decimal,
        output: str | int | Decimal,
        *,
        cache_read: str | int | Decimal | None = None,
        cache_write: str | int | Decimal | None = None,
        cache_write_1h: str | int | Decimal | None = None,
        reasoning: str | int | Decimal | None = None,
        input_audio: str | int | Decimal | None = None,
        output_audio: str | int | Decimal | None = None,
        cache_read_audio: str | int | Decimal | None = None,
        input_image: str | int | Decimal | None = None,
        output_image: str | int | Decimal | None = None,
        long_above: int | None = None,
        long_input: str | int | Decimal | None = None,
        long_output: str | int | Decimal | None = None,
        long_cache_read: str | int | Decimal | None = None,
        long_cache_write: str | int | Decimal | None = None,
        long_cache_write_1h: str | int | Decimal | None = None,
        as_of: dt.date | str | None = None,
        source: str | None = None,
        priority: Mapping[str, Any] | Price | None = None,
        flex: Mapping[str, Any] | Price | None = None,
        where: str = "Price",
    ) -> None:
        given = locals()
        set_ = object.__setattr__
        set_(self, "input", _micros(input, f"{where}.input"))
        set_(self, "output", _micros(output, f"{where}.output"))
        for name in RATES[2:]:
            value = given[name]
            set_(self, name, None if value is None else _micros(value, f"{where}.{name}"))
        if long_above is not None and (
            isinstance(long_above, bool) or not isinstance(long_above, int) or long_above <= 0
        ):
            raise ConfigError(
                f"{where}.long_above must be a positive token count, got {long_above!r}"
            )
        if long_above is None and any(given[name] is not None for name in _LONG):
            raise ConfigError(f"{where}: the long_* rates need long_above (the token threshold)")
        set_(self, "long_above", long_above)
        set_(self, "as_of", None if as_of is None else _date(as_of, f"{where}.as_of"))
        if source is not None and not isinstance(source, str):
            raise ConfigError(f"{where}.source must be a string (a URL or a note), got {source!r}")
        set_(self, "source", source)
        tiers: dict[str, Price] = {}
        for tier in TIERS:
            sub = given[tier]
            if sub is None:
                continue
            if isinstance(sub, Price):
                tiers[tier] = sub
                continue
            if not isinstance(sub, Mapping):
                raise ConfigError(f'{where}.{tier} must be a mapping of rates like {{input = "2.5"}}')
            bad = set(sub) - set(RATES) - {"long_above"}
            if bad:
                raise ConfigError(
                    f"{where}.{tier}.{sorted(bad)[0]} is not a rate; use {', '.join(RATES)}"
                )
            own: dict[str, Any] = {k: Decimal(v) / MICROS for k, v in self.rates().items()}
            own["long_above"] = long_above
            tiers[tier] = Price(where=f"{where}.{tier}", **{**own, **sub})
        set_(self, "tiers", tiers)
        # The highest prompt and reply rates, asked for every reservation: found once.
        short = self._tier(0)
        long = self._tier(long_above + 1) if long_above is not None else short
        prompt_kinds = [r for r in (getattr(self, k) for k in _PROMPT_KINDS) if r is not None]
        reply_kinds = [r for r in (getattr(self, k) for k in _REPLY_KINDS) if r is not None]
        set_(
            self,
            "_worst",
            (
                max(*short[:1], *short[2:5], *long[:1], *long[2:5], *prompt_kinds,
                    *(t._worst[0] for t in tiers.values())),
                max(short[1], short[5], long[1], long[5], *reply_kinds,
                    *(t._worst[1] for t in tiers.values())),
            ),
        )

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Price is immutable")

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Price)
            and all(getattr(self, k) == getattr(other, k) for k in _ROW_KEYS[:-len(TIERS)])
            and dict(self.tiers) == dict(other.tiers)
        )

    def __hash__(self) -> int:
        return hash(
            (tuple(getattr(self, k) for k in _ROW_KEYS[:-len(TIERS)]), tuple(sorted(self.tiers)))
        )

    def in_tier(self, tier: str | None) -> Price:
        """The rates a call billed in service `tier` pays: the tier's sub-row when the row
        prices it, else the row itself (the default tier, or a provider without tiers)."""
        if tier:
            return self.tiers.get(tier, self)
        return self

    def rates(self) -> dict[str, int]:
        """Every rate the row sets, by field name, in micro-units per million tokens."""
        return {k: v for k in RATES if (v := getattr(self, k)) is not None}

    def _tier(self, prompt_tokens: int) -> tuple[int, int, int, int, int, int]:
        """input, output, cache read, cache write, 1-hour cache write, reasoning rates for a
        prompt of this size."""
        long = self.long_above is not None and prompt_tokens > self.long_above

        def pick(short: int | None, long_rate: int | None) -> int | None:
            return long_rate if long and long_rate is not None else short

        inp = pick(self.input, self.long_input) or 0
        out = pick(self.output, self.long_output) or 0
        read = pick(self.cache_read, self.long_cache_read)
        write = pick(self.cache_write, self.long_cache_write)
        write_1h = pick(self.cache_write_1h, self.long_cache_write_1h)
        read = inp if read is None else read
        write = inp if write is None else write
        write_1h = write if write_1h is None else write_1h
        return inp, out, read, write, write_1h, self.reasoning if self.reasoning is not None else out

    def cost(self, usage: Usage) -> int:
        """What `usage` costs, in micro-units, rounded up: in the service tier it names
        (`usage.tier`) when the row prices that tier; audio and image tokens at their own
        rates when the row has them."""
        if usage.tier and usage.tier in self.tiers:
            return self.tiers[usage.tier].cost(replace(usage, tier=""))
        if not (
            usage.cache_read or usage.cache_write or usage.reasoning or usage.prompt_audio
            or usage.completion_audio
        ) and (self.long_above is None or usage.prompt <= self.long_above):
            # Plain prompt and reply tokens, the common bill.
            return _ceil_div(usage.prompt * self.input + usage.completion * self.output, MICROS)
        inp, out, read, write, write_1h, reasoning_rate = self._tier(usage.prompt)
        cached = min(max(usage.cache_read, 0), usage.prompt)
        written = min(max(usage.cache_write, 0), usage.prompt - cached)
        written_1h = min(max(usage.cache_write_1h, 0), written)
        plain = usage.prompt - cached - written
        reasoning = min(max(usage.reasoning, 0), usage.completion)
        # Audio tokens are part of the plain prompt and the plain reply, at their own rates.
        heard = min(max(usage.prompt_audio, 0), plain)
        spoken = min(max(usage.completion_audio, 0), usage.completion - reasoning)
        in_audio = self.input_audio if self.input_audio is not None else inp
        out_audio = self.output_audio if self.output_audio is not None else out
        numerator = (
            (plain - heard) * inp
            + heard * in_audio
            + cached * read
            + (written - written_1h) * write
            + written_1h * write_1h
            + reasoning * reasoning_rate
            + spoken * out_audio
            + (usage.completion - reasoning - spoken) * out
        )
        return _ceil_div(numerator, MICROS)

    def estimate(self, prompt_tokens: int, reply_tokens: int) -> int:
        """A plain estimate: prompt at the input rate, reply at the output rate (micros)."""
        inp, out, *_ = self._tier(prompt_tokens)
        return _ceil_div(prompt_tokens * inp + reply_tokens * out, MICROS)

    def worst_case(self, prompt_bound: int, reply_bound: int) -> int:
        """The most a call can be billed, given bounds on its prompt and reply tokens.

        Every prompt token is priced at the highest rate any prompt token can have (input,
        cache read, either cache write, in either tier) and every reply token at the highest
        a reply token can have (output, reasoning, in either tier), so no bill `cost` can
        compute for such a call exceeds it.
        """
        in_rate, out_rate = self._worst
        return _ceil_div(prompt_bound * in_rate + reply_bound * out_rate, MICROS)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={Decimal(v) / MICROS}" for k, v in self.rates().items())
        tier = f", long_above={self.long_above}" if self.long_above is not None else ""
        tiers = "".join(f", {name}={price!r}" for name, price in self.tiers.items())
        return f"Price({shown}{tier}{tiers})"

    @classmethod
    def from_litellm(cls, entry: Mapping[str, Any], where: str = "litellm") -> Price:
        """A row from LiteLLM's cost fields (`input_cost_per_token`, ...: per-token floats,
        as in `litellm.model_cost` and a model_list's `model_info`), exactly.

        Every per-token rate LiteLLM has for a model is kept: cache reads and writes (five
        minutes, one hour), reasoning, audio and image tokens, the `priority` and `flex`
        service tiers (their `..._priority` / `..._flex` fields), and long-context tiers
        (`..._above_200k_tokens`), whose threshold is kept; where a model has several, the
        lowest threshold carries the highest rates of all of them, so the row never bills
        below LiteLLM's. Raises `ConfigError` without input and output rates.
        """
        found: dict[str, dict[str, Any]] = {"": {}, **{t: {} for t in TIERS}}
        long_above: int | None = None
        for key, value in entry.items():
            if value is None:
                continue
            name, tier = str(key), ""
            for suffix in TIERS:
                if name.endswith(f"_{suffix}"):
                    name, tier = name[: -len(suffix) - 1], suffix
            rates = found[tier]
            if name in _LITELLM_FIELDS:
                rates[_LITELLM_FIELDS[name]] = _per_million(value, f"{where}.{key}")
                continue
            match = _LITELLM_TIER.match(name)
            if match and match["field"] in _LITELLM_LONG:
                threshold = int(match["k"]) * 1000
                long_above = threshold if long_above is None else min(long_above, threshold)
                ours = _LITELLM_LONG[match["field"]]
                rate = _per_million(value, f"{where}.{key}")
                if ours not in rates or Decimal(rate) > Decimal(rates[ours]):
                    rates[ours] = rate
        base: dict[str, Any] = found[""]
        if "output" not in base and entry.get("mode") == "embedding":
            base["output"] = "0"  # an embedding model writes no tokens (mistral-embed)
        if "input" not in base or "output" not in base:
            raise ConfigError(f"{where}: no input_cost_per_token and output_cost_per_token")
        if long_above is not None:
            base["long_above"] = long_above
        tiers: dict[str, Any] = {t: rates for t in TIERS if (rates := found[t])}
        return cls(where=where, **base, **tiers)


_LITELLM_FIELDS = {
    "input_cost_per_token": "input",
    "output_cost_per_token": "output",
    "cache_read_input_token_cost": "cache_read",
    "cache_creation_input_token_cost": "cache_write",
    "cache_creation_input_token_cost_above_1hr": "cache_write_1h",
    "output_cost_per_reasoning_token": "reasoning",
    "input_cost_per_audio_token": "input_audio",
    "output_cost_per_audio_token": "output_audio",
    "cache_read_input_audio_token_cost": "cache_read_audio",
    "input_cost_per_image_token": "input_image",
    "output_cost_per_image_token": "output_image",
}
_LITELLM_LONG = {
    "input_cost_per_token": "long_input",
    "output_cost_per_token": "long_output",
    "cache_read_input_token_cost": "long_cache_read",
    "cache_creation_input_token_cost": "long_cache_write",
    "cache_creation_input_token_cost_above_1hr": "long_cache_write_1h",
}
_LITELLM_TIER = re.compile(r"^(?P<field>[a-z_]+?(?:_above_1hr)?)_above_(?P<k>\d+)k_tokens$")


def _per_million(per_token: object, where: str) -> str:
    """LiteLLM's per-token float as an exact per-million decimal string."""
    if isinstance(per_token, bool) or not isinstance(per_token, int | float | str | Decimal):
        raise ConfigError(f"{where} must be a cost per token, got {per_token!r}")
    # repr() of a float is the shortest decimal that round-trips: no binary noise.
    value = Decimal(repr(per_token) if isinstance(per_token, float) else str(per_token))
    return str((value * MICROS).quantize(Decimal("0.000001")).normalize())



def _date(value: object, where: str) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            pass
    raise ConfigError(f'{where} must be a date like "2026-11-01", got {value!r}')
