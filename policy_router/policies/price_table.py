"""Dated price tables: a currency, the date the figures were true, where they came from.

Every table carries its currency, `as_of` and `source`: a price nobody can date is never
used to choose or refuse a route silently (`router.check()` reports stale tables). Files
are TOML or YAML in the format of DESIGN §7; decimals are read exactly, never as floats.
"""

from __future__ import annotations

import datetime as dt
import tomllib
from collections.abc import Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..ground import catalog
from ..ground.errors import ConfigError
from ..ground.money import _currency
from .prices import _ROW_KEYS, Price, _date

__all__ = ['PriceTable', 'load_yaml']


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
    def free(cls, *models: str, currency: str = "USD") -> PriceTable:
        """A table pricing each of `models` (LiteLLM model strings) at zero: a model you
        serve yourself costs nothing per token, so a budget admits it like any priced route
        and it is never refused as unpriced. Only the models named are free; any other stays
        unpriced. Dated today, since a zero rate does not go stale."""
        if not models or not all(isinstance(m, str) and m.strip() for m in models):
            raise ConfigError(
                "PriceTable.free(...) takes the LiteLLM model strings it prices at zero, "
                f'e.g. PriceTable.free("openai/local-llama"); got {models!r}'
            )
        zero = {m: Price(input="0", output="0") for m in models}
        return cls(currency, dt.date.today(), "free: served by you, no charge per token", zero, name="free")

    @classmethod
    def default(cls) -> PriceTable:
        """The table shipped with the package: common OpenAI, Anthropic, Google, Mistral and
        DeepSeek models, each row with its source. Check `as_of` before trusting it."""
        return cls.load(Path(__file__).parents[1] / "tables" / "default.toml")

    @classmethod
    def from_litellm(
        cls, models: Iterable[str], *, as_of: dt.date | str, currency: str = "USD"
    ) -> PriceTable:
        """Import rows from LiteLLM's cost map, marked as such.

        LiteLLM's map carries no date, so the caller vouches for one with `as_of`. Its
        per-token floats are converted to exact per-million decimals. A model missing from
        the map raises `ConfigError` rather than becoming a free row.
        """

        rows = {
            model: Price.from_litellm(entry, f"litellm cost map: {model}")
            for model, entry in catalog.cost_map_rows(list(models)).items()
        }
        return cls(
            currency,
            as_of,
            f"litellm {catalog.litellm_version()} model_cost map (imported)",
            rows,
            name="litellm",
        )

    def __repr__(self) -> str:
        return (
            f"PriceTable({self.name!r}, {self.currency}, as_of={self.as_of.isoformat()}, "
            f"{len(self.rows)} rows)"
        )


def _parse(text: str, path: Path) -> Any:
    if path.suffix == ".toml":
        try:
            # Numbers with a point are read exactly from their written text: `cap = 5.00`.
            return tomllib.loads(text, parse_float=Decimal)
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"{path}: not valid TOML ({error})") from None
    if path.suffix in (".yaml", ".yml"):
        return load_yaml(text, path)
    raise ConfigError(f"{path}: unknown file type; use .toml, .yaml or .yml")


def load_yaml(text: str, path: Path | str) -> Any:
    """Parse YAML as `yaml.safe_load` does (anchors, aliases and `<<:` merge keys
    included), refusing a key written twice in one mapping, which YAML would otherwise let
    the last win. A key a merge brings in may be overridden by the mapping's own, as YAML
    says."""
    import yaml

    class _Strict(yaml.SafeLoader):
        pass

    def mapping(loader: _Strict, node: yaml.MappingNode) -> dict[Any, Any]:
        own = sum(1 for key_node, _ in node.value if key_node.tag != "tag:yaml.org,2002:merge")
        # SafeLoader's own step: the merged mappings' pairs go first, the merge keys away.
        loader.flatten_mapping(node)
        merged = len(node.value) - own
        out: dict[Any, Any] = {}
        written: set[Any] = set()
        for index, (key_node, value_node) in enumerate(node.value):
            key = loader.construct_object(key_node, deep=True)
            if index >= merged:
                if key in written:
                    raise ConfigError(
                        f"{path}: duplicate key {key!r} (line {key_node.start_mark.line + 1})"
                    )
                written.add(key)
            out[key] = loader.construct_object(value_node, deep=True)
        return out

    def exact(loader: _Strict, node: yaml.ScalarNode) -> Decimal:
        # A number with a point is read from its written text (`cap: 5.00` is 5.00, not a
        # binary float): money stays exact; other fields take it as a number all the same.
        text = str(loader.construct_scalar(node)).replace("_", "").lower()
        special = {".inf": "Infinity", "+.inf": "Infinity", "-.inf": "-Infinity", ".nan": "NaN"}
        return Decimal(special.get(text, text))

    _Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    _Strict.add_constructor("tag:yaml.org,2002:float", exact)
    try:
        return yaml.load(text, Loader=_Strict)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML ({error})") from None
