"""Configuration files: a policy in YAML, TOML or a dict, or a LiteLLM proxy config.

The schema is strict (pydantic, `extra="forbid"`): a typo is an error naming its place in
the file, such as `groups.smart.routes[2].reach`, and the fix. A route may carry any
LiteLLM keyword argument (`api_version`, `extra_headers`, ...), passed through as written;
a key that is neither a route field nor a LiteLLM argument is refused. Secrets are given by
reference, LiteLLM's way: `api_key: os.environ/OPENAI_API_KEY`. A literal key in a file is
accepted with a warning, because files get committed. Money is read exactly from its
written text (`cap: 5.00` in YAML or TOML); a float handed over in a dict is refused, since
it cannot hold an amount exactly.

A file with a top-level `model_list` (and no `groups`) is a LiteLLM proxy `config.yaml`,
read by `config.litellm`.
"""

from __future__ import annotations

import difflib
import typing
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ValidationError

from ..ground import catalog
from ..ground.errors import ConfigError
from ..ground.money import Money
from ..ground.route import Route
from ..ground.secrets import is_secret_name
from ..policies.breaker import Breaker
from ..policies.hedge import Hedge
from ..policies.price_table import PriceTable, _parse
from ..policies.retry import Retry
from . import spec
from .keys import keys_of
from .litellm import ENV_PREFIX, Loaded, from_environment, secret
from .observing import learning_policies, observers_of
from .proxy import is_proxy_config, proxy_config
from .spec import BreakerSpec, PolicySpec, RouteSpec

__all__ = ["Loaded", "load", "routes_and_policies"]

def _where(loc: Sequence[int | str]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _is_tag(part: int | str) -> bool:
    """A place pydantic names by the type it tried (`BreakerSpec`, `literal[False]`, `str`),
    not a key of the file."""
    if isinstance(part, int):
        return False
    return (
        part in ("str", "dict[str,any]", "none")
        or "[" in part
        or part in _SPEC_NAMES
    )


_NOT_AS_WRITTEN = frozenset({"model", "prices", "retry"})
"""A policy file's route keys that do not reach `Route` as written: the model goes first,
the prices and the retry are read into objects."""

_SPEC_NAMES = frozenset(
    name for name, value in vars(spec).items()
    if isinstance(value, type) and issubclass(value, BaseModel)
)


def _keys_at(loc: Sequence[int | str]) -> list[str]:
    """The keys the schema allows at `loc` (a place in the file), for a suggestion."""
    model: type[BaseModel] | None = PolicySpec
    parts = list(loc)
    while parts and model is not None:
        part = parts.pop(0)
        found = next(
            (f for n, f in model.model_fields.items() if (f.alias or n) == part), None
        )
        if found is None:
            return []
        model, keyed = _model_in(found.annotation)
        if keyed and parts:
            parts.pop(0)  # a mapping's key or a list's index
    return [f.alias or n for n, f in model.model_fields.items()] if model is not None else []


def _model_in(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The schema model inside a field's type, and whether a key or an index comes first
    (`dict[str, GroupSpec]`, `list[RouteSpec]`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (dict, list, tuple, Mapping, Sequence) or (
        isinstance(origin, type) and issubclass(origin, (Mapping, Sequence))
    ):
        inner = args[-1] if args else None
        model, _ = _model_in(inner)
        return model, True
    for arg in args:  # a union: the first model in it
        model, keyed = _model_in(arg)
        if model is not None:
            return model, keyed
    return None, False


def _validation_error(error: ValidationError, source: str) -> ConfigError:
    lines = []
    errors = error.errors()
    # A field that may be a section or `false` (`breaker: false`) reports a failed try of
    # every member of the union: the section's own error is the one that helps.
    sections = {tuple(e["loc"][:1]) for e in errors if any(p in _SPEC_NAMES for p in e["loc"])}
    for e in errors:
        if tuple(e["loc"][:1]) in sections and not any(p in _SPEC_NAMES for p in e["loc"]):
            continue
        loc = [p for p in e["loc"] if not _is_tag(p)]
        message = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            close = difflib.get_close_matches(
                str(loc[-1]) if loc else "", _keys_at(loc[:-1]), n=1, cutoff=0.6
            )
            message = (
                f"unknown key; did you mean {close[0]!r}?"
                if close
                else "unknown key; remove it or check its spelling"
            )
        if e["type"] == "missing":
            given = e.get("input")
            keys = [str(k) for k in given] if isinstance(given, Mapping) else []
            close = difflib.get_close_matches(str(loc[-1]) if loc else "", keys, n=1, cutoff=0.6)
            if close:
                message = f"required, and missing: is {close[0]!r} a misspelling of it?"
        lines.append(f"{_where(loc)}: {message}")
    return ConfigError(f"{source}: " + "; ".join(dict.fromkeys(lines)))


def _tables(spec: PolicySpec, base: Path) -> dict[str, PriceTable]:
    tables: dict[str, PriceTable] = {}
    for name, value in spec.price_tables.items():
        if value == "litellm":
            # Built from LiteLLM's map for the models that use it, as this file loads.
            models = [
                r.model
                for g in spec.groups.values()
                for r in g.routes
                if r.prices in (name, "litellm")
            ]
            tables[name] = litellm_table(models, name)
        else:
            tables[name] = _table(value, base, f"price_tables.{name}")
    if "litellm" not in tables:
        models = [r.model for g in spec.groups.values() for r in g.routes if r.prices == "litellm"]
        if models:
            tables["litellm"] = litellm_table(models, "litellm")
    return tables


def litellm_table(models: list[str], name: str) -> PriceTable:
    """A table of LiteLLM's map for `models`, dated today and naming the litellm version.

    A model the map does not know gets no row: its route is unpriced, which `check` says.
    """
    import datetime as dt

    from .price_tools import import_litellm

    known = []
    for model in dict.fromkeys(models):
        try:
            catalog.cost_map_entry(model)
        except ConfigError:
            continue
        known.append(model)
    table = import_litellm(known, as_of=dt.date.today())
    return PriceTable(
        table.currency,
        table.as_of,
        f"{table.source}, read when the config loaded (not a reviewed table)",
        table.rows,
        name=name,
    )


def _table(value: str | dict[str, Any], base: Path, where: str) -> PriceTable:
    if isinstance(value, dict):
        return PriceTable.from_dict(value, name=where)
    if value == "default":
        return PriceTable.default()
    path = Path(value) if Path(value).is_absolute() else base / value
    if not path.exists():
        raise ConfigError(f"{where}: no price table file at {path}")
    return PriceTable.load(path)


def _at(place: str, build: Any, *args: Any, **kwargs: Any) -> Any:
    """`build(*args, **kwargs)`, with a ConfigError's message prefixed by its place."""
    try:
        return build(*args, **kwargs)
    except ConfigError as error:
        raise ConfigError(f"{place}: {error}") from None


def _hedges(spec: PolicySpec, source: str) -> Hedge | dict[str, Hedge | None] | None:
    """The router's `hedge=`: the file's `hedge`, or per group where a group says its own."""
    default = _at(f"{source}: hedge", Hedge, **spec.hedge.model_dump()) if spec.hedge else None
    own = {g: gs.hedge for g, gs in spec.groups.items() if "hedge" in gs.model_fields_set}
    if not own:
        return default
    return {
        g: (
            _at(f"{source}: groups.{g}.hedge", Hedge, **own[g].model_dump())  # type: ignore[union-attr]
            if own.get(g)
            else (None if g in own else default)
        )
        for g in spec.groups
    }


def routes_and_policies(
    data: Mapping[str, Any], *, source: str = "config", base: Path | None = None
) -> Loaded:
    """Parse a policy mapping into routes, Router keyword arguments and unresolved secrets.

    Raises `ConfigError` for anything malformed, naming its place. Environment variables
    that are not set are returned as problems (the `check` command lists them;
    `Router.from_config` raises).
    """
    try:
        spec = PolicySpec.model_validate(data)
    except ValidationError as error:
        raise _validation_error(error, source) from None
    given, base = base, base or Path.cwd()
    tables = _tables(spec, base)
    missing: list[str] = []
    routes: list[Route] = []
    orders: dict[str, str] = {}
    for group, gspec in spec.groups.items():
        orders[group] = gspec.order
        for i, r in enumerate(gspec.routes):
            where = f"groups.{group}.routes[{i}]"
            read = from_environment(r.model_extra or {})
            extra = {
                key: secret(value, f"{where}.{key}", missing)
                for key, value in (r.model_extra or {}).items()
            }
            for key, value in (r.model_extra or {}).items():
                if (
                    is_secret_name(key)
                    and isinstance(value, str)
                    and not value.startswith(ENV_PREFIX)
                ):
                    warnings.warn(
                        f"{source}: {where}.{key} is a literal secret; write "
                        f"{key}: os.environ/NAME and keep the key out of the file",
                        UserWarning,
                        stacklevel=3,
                    )
            prices = None
            if isinstance(r.prices, str) and r.prices in tables:
                prices = tables[r.prices]
            elif r.prices == "free":  # a model served by you: zero per token
                prices = PriceTable.free(r.model, currency=spec.budget.currency if spec.budget else "USD")
            elif r.prices is not None:
                prices = _table(r.prices, base, f"{where}.prices")
            try:
                # The route's own keys are Route's own arguments (a test holds the two
                # lists together): each passed as written, but those read here.
                own = {f: getattr(r, f) for f in RouteSpec.model_fields if f not in _NOT_AS_WRITTEN}
                routes.append(
                    Route(
                        r.model,
                        group=group,
                        prices=prices,
                        retry=r.retry.made() if r.retry else None,
                        secrets=read,
                        **own,
                        **{k: v for k, v in extra.items() if v is not None},
                    )
                )
            except ConfigError as error:
                raise ConfigError(f"{source}: {where}: {error}") from None
    b = spec.budget
    policies: dict[str, Any] = {
        "name": spec.name,
        "order": orders,
        "budget": budget_of(b, "budget", source) if b else None,
        "budgets": [budget_of(s, f"budgets[{i}]", source) for i, s in enumerate(spec.budgets)],
        "retry": _at(f"{source}: retry", Retry, **spec.retry.model_dump(exclude_none=True))
        if spec.retry
        else None,
        "deadline": spec.deadline,
        "wait_for_capacity": spec.wait_for_capacity,
    }
    hedges = _hedges(spec, source)
    if hedges is not None:
        policies["hedge"] = hedges
    if "breaker" in spec.model_fields_set:  # absent: the router's default breaker
        policies["breaker"] = (
            _at(f"{source}: breaker", Breaker, **spec.breaker.model_dump())
            if isinstance(spec.breaker, BreakerSpec)
            else None
        )
    if isinstance(spec.store, str) or (spec.store is not None and spec.store.sqlite is not None):
        policies["store"] = sqlite_store(spec.store, base, source)
    elif spec.store is not None and spec.store.redis is not None:
        url = secret(spec.store.redis, "store.redis", missing)
        if url == spec.store.redis and urlsplit(url).password:
            warnings.warn(
                f"{source}: store.redis carries a literal password; write "
                "redis: os.environ/REDIS_URL and keep it out of the file",
                UserWarning,
                stacklevel=3,
            )
        if url is not None:
            from ..state.redis.store import RedisStore

            try:
                policies["store"] = RedisStore(
                    url,
                    namespace=spec.store.namespace,
                    timeout=spec.store.timeout,
                    retry_every=spec.store.retry_every,
                    cluster=spec.store.cluster,
                )
            except ConfigError as error:
                raise ConfigError(f"{source}: store: {error}") from None
    if spec.observers is not None:
        policies["observers"] = observers_of(spec.observers, base, source)
    policies |= learning_policies(
        spec.metrics, spec.metrics_scope, spec.score, source, base,
        lambda value, where: secret(value, where, missing),
    )
    keys = keys_of(spec.server, source, missing, frozenset(spec.groups))
    return Loaded(
        routes=routes, policies=policies, missing=missing, keys=keys, server=spec.server,
        base=given, source=source,
    )


def load(config: str | Path | Mapping[str, Any]) -> Loaded:
    """Read a policy, or a LiteLLM proxy config, from a YAML/TOML file or take a mapping.

    See `routes_and_policies` and `litellm_config.proxy_config`.
    """
    if isinstance(config, Mapping):
        data: Any = config
        source, base = "config", None
    else:
        path = Path(config)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"{path}: cannot read it ({error.strerror})") from None
        data = _parse(text, path)
        source, base = str(path), path.parent
        if not isinstance(data, Mapping):
            raise ConfigError(
                f"{path}: a policy file is a mapping with groups: at the top (or, for a "
                "LiteLLM proxy config, model_list:)"
            )
    if is_proxy_config(data):
        return proxy_config(data, source, base=base)
    return routes_and_policies(data, source=source, base=base)


def sqlite_store(given: Any, base: Path | None, source: str) -> Any:
    """The `SQLiteStore` a policy file's `store:` names: `sqlite:///path` (a path relative
    to the file, or absolute after the third slash) or `{sqlite: path, lease: s, settle_within: s}`."""
    from ..state.sqlite import SQLiteStore

    lease, within = 3600.0, 0.0
    if isinstance(given, str):
        if not given.startswith("sqlite://"):
            raise ConfigError(
                f"{source}: store: {given!r} is not a store; write sqlite:///path/to/state.sqlite, "
                "or {redis: URL}"
            )
        text = given.removeprefix("sqlite://").removeprefix("/")
    else:
        text, lease, within = given.sqlite, given.lease, given.settle_within
    path = Path(text)
    if not path.is_absolute() and base is not None:
        path = base / path
    try:
        return SQLiteStore(path, lease=lease, settle_within=within)
    except ConfigError as error:
        raise ConfigError(f"{source}: store: {error}") from None


def budget_of(spec: Any, place: str, source: str, **scope: str) -> Any:
    """The `Budget` of a file's budget section at `place`, each error named by its place
    (`budget.cap: ...`, `budgets[1]: ...`); `scope` one the file puts it under."""
    cap = _at(f"{source}: {place}.cap", Money.parse, spec.cap, spec.currency)
    return _at(f"{source}: {place}", spec.budget, cap, **scope)
