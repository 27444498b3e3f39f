"""Money in integer micro-units, per-model prices, and dated price tables.

No float ever touches a money path: amounts are integer micro-units of a currency
(`Money(150, "USD")` is $0.000150) and rates are integer micro-units per *million* tokens,
parsed from decimal strings. A cost is rounded *up* to the micro-unit, so a bill computed
here is never below the true one. Every table carries its currency, the date its figures
were true (`as_of`) and where they came from (`source`): a price nobody can date is never
used to choose or refuse a route silently (`router.check()` reports stale tables).
"""

from __future__ import annotations

import datetime as dt
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = ["Money", "Price", "PriceTable", "Usage"]

MICROS = 1_000_000
_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}


def _decimal(value: object, where: str) -> Decimal:
    """A non-negative decimal from a string or int; floats are refused, never rounded."""
    if isinstance(value, bool | float):
        raise ConfigError(
            f'{where} must be a decimal string like "0.15", got {value!r}: '
            "quote it, floats cannot hold prices exactly"
        )
    if not isinstance(value, str | int | Decimal):
        raise ConfigError(f'{where} must be a decimal string like "0.15", got {value!r}')
    try:
        number = Decimal(str(value).strip())
    except InvalidOperation:
        raise ConfigError(f'{where} must be a decimal string like "0.15", got {value!r}') from None
    if not number.is_finite() or number < 0:
        raise ConfigError(f"{where} must be zero or more, got {value!r}")
    return number


def _micros(value: object, where: str) -> int:
    number = _decimal(value, where) * MICROS
    if number != number.to_integral_value():
        raise ConfigError(f"{where}={value!r} has more than 6 decimal places; round it to micros")
    return int(number)


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def _currency(value: object, where: str) -> str:
    if not isinstance(value, str) or len(value) != 3 or not value.isalpha():
        raise ConfigError(f'{where} must be a 3-letter currency code like "USD", got {value!r}')
    return value.upper()


@dataclass(frozen=True, slots=True)
class Money:
    """An amount in integer micro-units (millionths) of a currency. Never a float.

    `Money.parse("5.00", "USD")`; `str(Money(150, "USD"))` is `$0.000150`. Adding or
    comparing two amounts in different currencies raises `ValueError`.
    """

    micros: int
    currency: str = "USD"

    @classmethod
    def parse(cls, amount: str | int | Decimal, currency: str = "USD") -> Money:
        """Parse a decimal amount ("5.00") in `currency` exactly, or raise `ConfigError`."""
        return cls(_micros(amount, "amount"), _currency(currency, "currency"))

    def _same(self, other: Money) -> None:
        if self.currency != other.currency:
            raise ValueError(f"cannot mix {self.currency} and {other.currency}")

    def __add__(self, other: Money) -> Money:
        self._same(other)
        return Money(self.micros + other.micros, self.currency)

    def __sub__(self, other: Money) -> Money:
        self._same(other)
        return Money(self.micros - other.micros, self.currency)

    def __lt__(self, other: Money) -> bool:
        self._same(other)
        return self.micros < other.micros

    def __le__(self, other: Money) -> bool:
        self._same(other)
        return self.micros <= other.micros

    @property
    def amount(self) -> Decimal:
        """The amount as an exact `Decimal` in whole currency units."""
        return Decimal(self.micros) / MICROS

    def __str__(self) -> str:
        sign = "-" if self.micros < 0 else ""
        units, micros = divmod(abs(self.micros), MICROS)
        text = f"{units}.{micros:06d}"
        symbol = _SYMBOLS.get(self.currency)
        return f"{sign}{symbol}{text}" if symbol else f"{sign}{text} {self.currency}"


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens a provider billed for one call. Cache and reasoning counts are subsets.

    `cache_read` and `cache_write` are part of `prompt`; `reasoning` is part of
    `completion`, as in OpenAI's usage and LiteLLM's normalised usage.
    """

    prompt: int
    completion: int
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0


_ROW_KEYS = (
    "input",
    "output",
    "cache_read",
    "cache_write",
    "reasoning",
    "long_above",
    "long_input",
    "long_output",
    "as_of",
    "source",
)


class Price:
    """One model's rates, in micro-units of the table's currency per million tokens.

    `Price(input="0.15", output="0.60", cache_read="0.075")`. Optional rates: `cache_read`
    (cached prompt tokens), `cache_write` (tokens written to a prompt cache), `reasoning`
    (reasoning tokens, when billed apart from output), and a long-context tier:
    prompts over `long_above` tokens are billed at `long_input`/`long_output`. A missing
    cache or reasoning rate falls back to the input or output rate.
    """

    __slots__ = (
        "as_of",
        "cache_read",
        "cache_write",
        "input",
        "long_above",
        "long_input",
        "long_output",
        "output",
        "reasoning",
        "source",
    )

    input: int
    output: int
    cache_read: int | None
    cache_write: int | None
    reasoning: int | None
    long_above: int | None
    long_input: int | None
    long_output: int | None
    as_of: dt.date | None
    source: str | None

    def __init__(
        self,
        input: str | int | Decimal,
        output: str | int | Decimal,
        *,
        cache_read: str | int | Decimal | None = None,
        cache_write: str | int | Decimal | None = None,
        reasoning: str | int | Decimal | None = None,
        long_above: int | None = None,
        long_input: str | int | Decimal | None = None,
        long_output: str | int | Decimal | None = None,
        as_of: dt.date | str | None = None,
        source: str | None = None,
        where: str = "Price",
    ) -> None:
        def rate(name: str, value: object) -> int | None:
            return None if value is None else _micros(value, f"{where}.{name}")

        set_ = object.__setattr__
        set_(self, "input", _micros(input, f"{where}.input"))
        set_(self, "output", _micros(output, f"{where}.output"))
        for name, value in (
            ("cache_read", cache_read),
            ("cache_write", cache_write),
            ("reasoning", reasoning),
            ("long_input", long_input),
            ("long_output", long_output),
        ):
            set_(self, name, rate(name, value))
        if long_above is not None and (
            isinstance(long_above, bool) or not isinstance(long_above, int) or long_above <= 0
        ):
            raise ConfigError(
                f"{where}.long_above must be a positive token count, got {long_above!r}"
            )
        if long_above is None and (long_input is not None or long_output is not None):
            raise ConfigError(
                f"{where}: long_input/long_output need long_above (the token threshold)"
            )
        set_(self, "long_above", long_above)
        set_(self, "as_of", None if as_of is None else _date(as_of, f"{where}.as_of"))
        if source is not None and not isinstance(source, str):
            raise ConfigError(f"{where}.source must be a string (a URL or a note), got {source!r}")
        set_(self, "source", source)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Price is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Price) and all(
            getattr(self, k) == getattr(other, k) for k in self.__slots__
        )

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, k) for k in self.__slots__))

    def _rates(self, prompt_tokens: int) -> tuple[int, int]:
        if self.long_above is not None and prompt_tokens > self.long_above:
            return self.long_input or self.input, self.long_output or self.output
        return self.input, self.output

    def cost(self, usage: Usage) -> int:
        """What `usage` costs, in micro-units, rounded up."""
        in_rate, out_rate = self._rates(usage.prompt)
        cached = min(max(usage.cache_read, 0), usage.prompt)
        written = min(max(usage.cache_write, 0), usage.prompt - cached)
        plain = usage.prompt - cached - written
        reasoning = min(max(usage.reasoning, 0), usage.completion)
        numerator = (
            plain * in_rate
            + cached * (self.cache_read if self.cache_read is not None else in_rate)
            + written * (self.cache_write if self.cache_write is not None else in_rate)
            + reasoning * (self.reasoning if self.reasoning is not None else out_rate)
            + (usage.completion - reasoning) * out_rate
        )
        return _ceil_div(numerator, MICROS)

    def estimate(self, prompt_tokens: int, reply_tokens: int) -> int:
        """A plain estimate: prompt at the input rate, reply at the output rate (micros)."""
        in_rate, out_rate = self._rates(prompt_tokens)
        return _ceil_div(prompt_tokens * in_rate + reply_tokens * out_rate, MICROS)

    def worst_case(self, prompt_bound: int, reply_bound: int) -> int:
        """The most a call can be billed, given bounds on its prompt and reply tokens.

        Every prompt token is priced at the highest rate a prompt token can have (input,
        cache read or write, or the long-context tier) and every reply token at the highest a reply
        token can have (output, reasoning, long-context output).
        """
        in_rate = max(self.input, self.cache_read or 0, self.cache_write or 0, self.long_input or 0)
        out_rate = max(self.output, self.reasoning or 0, self.long_output or 0)
        return _ceil_div(prompt_bound * in_rate + reply_bound * out_rate, MICROS)

    def __repr__(self) -> str:
        def d(v: int | None) -> str:
            return "-" if v is None else str(Decimal(v) / MICROS)

        return f"Price(input={d(self.input)}, output={d(self.output)}, cache_read={d(self.cache_read)})"


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


class PriceTable:
    """Rates for models in one currency, true as of one date, from one stated source.

    Rows are keyed by LiteLLM model string (`openai/gpt-4o-mini`); a row may override
    `as_of`/`source`. A route whose model has no row is *unpriced*, which is not free.
    Load one with `PriceTable.load(path)` (TOML or YAML), `PriceTable.from_dict(data)`,
    `PriceTable.default()` (the table shipped in the package) or
    `PriceTable.from_litellm(models, as_of=...)`. A table does not know whether its
    figures are still true: `age_days()` says how old they are.
    """

    __slots__ = ("as_of", "currency", "name", "rows", "source")

    def __init__(
        self,
        currency: str,
        as_of: dt.date | str,
        source: str,
        rows: Mapping[str, Price],
        *,
        name: str = "table",
    ) -> None:
        self.currency = _currency(currency, f"price table {name}: currency")
        self.as_of = _date(as_of, f"price table {name}: as_of")
        if not isinstance(source, str) or not source.strip():
            raise ConfigError(f"price table {name}: source must say where the prices come from")
        self.source = source
        self.rows: Mapping[str, Price] = dict(rows)
        self.name = name

    def price_for(self, model: str) -> Price | None:
        """The row for a LiteLLM model string, or None when the table has no such row."""
        return self.rows.get(model)

    def row_as_of(self, model: str) -> dt.date:
        price = self.rows[model]
        return price.as_of or self.as_of

    def age_days(self, today: dt.date | None = None) -> int:
        """Days since the oldest date any row's figures were true."""
        today = today or dt.date.today()
        oldest = min([self.as_of, *(p.as_of for p in self.rows.values() if p.as_of)])
        return (today - oldest).days

    # -- loading ---------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, name: str = "table") -> PriceTable:
        """Build a table from the documented shape; raise `ConfigError` naming row and field."""
        where = f"price table {name}"
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where} must be a mapping with currency, as_of, source, models")
        unknown = set(data) - {"currency", "as_of", "source", "models"}
        if unknown:
            raise ConfigError(
                f"{where}: unknown key {sorted(unknown)[0]!r}; use currency, as_of, source, models"
            )
        for key in ("currency", "as_of", "source", "models"):
            if key not in data:
                raise ConfigError(f"{where}: missing {key!r}")
        models = data["models"]
        if not isinstance(models, Mapping):
            raise ConfigError(f"{where}: models must map a LiteLLM model string to its rates")
        rows: dict[str, Price] = {}
        for model, row in models.items():
            rwhere = f"{where}: models.{model!r}"
            if not isinstance(row, Mapping):
                raise ConfigError(f'{rwhere} must be a mapping of rates like {{input = "0.15"}}')
            bad = set(row) - set(_ROW_KEYS)
            if bad:
                raise ConfigError(
                    f"{rwhere}.{sorted(bad)[0]} is not a price field; use {', '.join(_ROW_KEYS)}"
                )
            for required in ("input", "output"):
                if required not in row:
                    raise ConfigError(f"{rwhere}: missing {required!r} (per million tokens)")
            rows[str(model)] = Price(where=rwhere, **row)
        return cls(data["currency"], data["as_of"], data["source"], rows, name=name)

    @classmethod
    def load(cls, path: str | Path) -> PriceTable:
        """Read a TOML (`.toml`) or YAML (`.yaml`/`.yml`) table from a file."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"price table {path}: cannot read it ({error.strerror})") from None
        return cls.from_dict(_parse(text, path), name=str(path))

    @classmethod
    def default(cls) -> PriceTable:
        """The table shipped with the package: common OpenAI, Anthropic, Google, Mistral and
        DeepSeek models, each row with its source. Check `as_of` before trusting it."""
        return cls.load(Path(__file__).with_name("tables") / "default.toml")

    @classmethod
    def from_litellm(
        cls, models: Iterable[str], *, as_of: dt.date | str, currency: str = "USD"
    ) -> PriceTable:
        """Import rows from LiteLLM's cost map, marked as such.

        LiteLLM's map carries no date, so the caller vouches for one with `as_of`. Its
        per-token floats are converted to exact per-million decimals. A model missing from
        the map raises `ConfigError` rather than becoming a free row.
        """
        from . import transport

        rows: dict[str, Price] = {}
        found = transport.cost_map_rows(list(models))
        for model, entry in found.items():
            rates = {k: _per_million(v) for k, v in entry.items()}
            rows[model] = Price(
                rates.pop("input"),
                rates.pop("output"),
                cache_read=rates.get("cache_read"),
                cache_write=rates.get("cache_write"),
                reasoning=rates.get("reasoning"),
                where=f"litellm cost map: {model}",
            )
        return cls(
            currency,
            as_of,
            f"litellm {transport.litellm_version()} model_cost map (imported)",
            rows,
            name="litellm",
        )

    def __repr__(self) -> str:
        return (
            f"PriceTable({self.name!r}, {self.currency}, as_of={self.as_of.isoformat()}, "
            f"{len(self.rows)} rows)"
        )


def _per_million(per_token: float) -> str:
    # repr() of a float is the shortest decimal that round-trips: no binary noise.
    value = Decimal(repr(per_token)) * MICROS
    return str(value.quantize(Decimal("0.000001")).normalize())


def _parse(text: str, path: Path) -> Any:
    if path.suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"{path}: not valid TOML ({error})") from None
    if path.suffix in (".yaml", ".yml"):
        return load_yaml(text, path)
    raise ConfigError(f"{path}: unknown file type; use .toml, .yaml or .yml")


def load_yaml(text: str, path: Path | str) -> Any:
    """Parse YAML, refusing duplicate keys (which YAML would otherwise let the last win)."""
    import yaml

    class _Strict(yaml.SafeLoader):
        pass

    def mapping(loader: _Strict, node: yaml.MappingNode) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if key in out:
                raise ConfigError(
                    f"{path}: duplicate key {key!r} (line {key_node.start_mark.line + 1})"
                )
            out[key] = loader.construct_object(value_node, deep=True)
        return out

    _Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        return yaml.load(text, Loader=_Strict)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML ({error})") from None
