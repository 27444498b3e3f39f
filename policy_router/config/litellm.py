"""LiteLLM's own configuration, loaded faithfully: a Router `model_list`, and a whole proxy
`config.yaml` (`model_list`, `router_settings`, `litellm_settings`, `general_settings`).

Every setting is honoured, mapped to its policy_router equivalent, or reported by
`router.check()` as not applied, with its place (`model_list[2].litellm_params.weight`):
never dropped in silence. An `os.environ/NAME` whose variable is not set is an error naming
NAME, never a call sent with some other key.

What maps to what:

- `model_name` is the group; `litellm_params` the route's LiteLLM kwargs; `model_info`'s
  `supports_*` flags its capabilities, `mode` what it serves (`embedding`, `chat`, ...),
  `max_output_tokens` its output limit, `reach` its reach, `id` its id (and name);
- cost fields (`input_cost_per_token`, `output_cost_per_token`, cache and long-context
  costs), in `litellm_params` or `model_info`, price the route (a table dated the day the
  config is read, since the file gives no date);
- `rpm`/`tpm` (entry or `litellm_params`) become the route's rate limits; `order` orders
  the group's routes (lowest first, as LiteLLM's Router tries them);
  `max_retries`/`num_retries` become the route's `Retry`;
- `router_settings`: `routing_strategy` maps to an order, `num_retries` to `Retry`,
  `allowed_fails`/`cooldown_time` to the `Breaker`, `timeout` to every route's default
  timeout, `redis_*` to a shared `RedisStore`;
- `litellm_settings`: `num_retries`, `request_timeout` and `drop_params` likewise.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..ground import catalog
from ..ground.capability import MODES
from ..ground.errors import ConfigError
from ..ground.route import Route
from ..policies.price_table import PriceTable
from ..policies.prices import Price
from ..policies.retry import Retry

__all__ = ["ENV_PREFIX", "Loaded", "from_environment", "model_list_routes", "secret"]

ENV_PREFIX = "os.environ/"

_CAPABILITY_KEYS = {
    "supports_function_calling": "tools",
    "supports_vision": "images",
    "supports_response_schema": "structured_output",
    "supports_prompt_caching": "prompt_caching",
    "supports_reasoning": "thinking",
    "supports_native_streaming": "streaming",
}
_COST_KEYS = (
    "input_cost_per_token",
    "output_cost_per_token",
    "cache_read_input_token_cost",
    "cache_creation_input_token_cost",
    "cache_creation_input_token_cost_above_1hr",
    "output_cost_per_reasoning_token",
)
# LiteLLM Router's own per-deployment keys, not litellm.completion arguments.
_DEPLOYMENT_NOTES = {
    "weight": "weighted shuffling is not a policy here; use order= (cheapest, round_robin, ...)",
    "tags": "tag-based routing is not supported; put tagged deployments in their own group",
    "max_parallel_requests": "not enforced; use rpm to bound a deployment's load",
}
# Keys LiteLLM's Router or proxy reads from litellm_params that do not map onto a route here.
_ROUTER_ONLY = {
    "stream_timeout": "the router's deadline bounds a stream; set timeout or deadline",
    "max_budget": "per-deployment budgets are not a policy here; use the router's Budget",
    "budget_duration": "per-deployment budgets are not a policy here; use the router's Budget",
    "access_groups": "access groups are the proxy's key management",
    "team_id": "teams are the proxy's key management",
    "itpm": "input-token limits are not counted apart; use tpm",
    "otpm": "output-token limits are not counted apart; use tpm",
}
# model_info keys read here; every other one is listed as informational.
_MODEL_INFO_READ = {"id", "mode", "max_output_tokens", "max_input_tokens", "reach", "base_model"}


@dataclass(kw_only=True)
class Loaded:
    """What a configuration gives: routes, Router keyword arguments, variables that are
    not set (errors when building a router), and settings not applied (with their place)."""

    routes: list[Route]
    policies: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    keys: tuple[Any, ...] = ()  # a policy file's server keys (`config.keys.ApiKey`), hashed
    server: Any = None  # a policy file's `server:` section (`config.spec.ServerSpec`), if any
    base: Any = None  # the directory of the file it was read from (a Path), if any
    source: str = "config"  # the file's path, or "config" for a mapping


def from_environment(
    params: Mapping[str, Any], env: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """The values `params` reads from `os.environ/NAME` references: secrets, whatever the
    keyword that holds them is called, so the router scrubs them from every output."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str) and value.startswith(ENV_PREFIX):
            name = value.removeprefix(ENV_PREFIX)
            resolved = (env or {}).get(name) or os.environ.get(name)
            if resolved:
                found.append(resolved)
        elif isinstance(value, Mapping):
            for inner in value.values():
                walk(inner)
        elif isinstance(value, list | tuple):
            for inner in value:
                walk(inner)

    for value in params.values():
        walk(value)
    return tuple(found)


def secret(
    value: Any, where: str, missing: list[str], env: Mapping[str, str] | None = None
) -> Any:
    """Resolve `os.environ/NAME` (from the config's own `environment_variables` first), at
    any depth: inside `extra_headers: {Authorization: os.environ/KEY}` or a list as well;
    record a variable that is not set rather than guess."""
    if isinstance(value, str) and value.startswith(ENV_PREFIX):
        name = value.removeprefix(ENV_PREFIX)
        resolved = (env or {}).get(name) or os.environ.get(name)
        if resolved is None:
            missing.append(f"{where}: environment variable {name} is not set")
        return resolved
    if isinstance(value, Mapping):
        return {k: secret(v, f"{where}.{k}", missing, env) for k, v in value.items()}
    if isinstance(value, list):
        return [secret(v, f"{where}[{i}]", missing, env) for i, v in enumerate(value)]
    return value


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where} must be a whole number >= 0, got {value!r}")
    return value


def _retry(value: Any, where: str) -> Retry | None:
    retries = _count(value, where)
    return Retry(attempts=retries + 1) if retries else None


def _complete(costs: dict[str, Any], model: str, here: str, loaded: Loaded) -> None:
    """A deployment that gives one of the input and output rates takes the other from
    LiteLLM's cost map for its model, as LiteLLM's Router prices it, and `check()` says so;
    with no row to take it from, the price stays incomplete (and is refused, naming it)."""
    missing = [k for k in ("input_cost_per_token", "output_cost_per_token") if costs.get(k) is None]
    if not missing or len(missing) == 2:
        return
    try:
        key, row = catalog.cost_map_entry(model)
    except ConfigError:
        return
    for name in missing:
        if row.get(name) is not None:
            costs[name] = row[name]
            loaded.notes.append(
                f"{here}: {name} is not given: LiteLLM's cost-map rate for {key} is used, as "
                "LiteLLM's Router does"
            )


def _prices(costs: Mapping[str, Any], model: str, where: str) -> PriceTable:
    today = dt.date.today()
    return PriceTable(
        "USD",
        today,
        f"{where} cost fields (LiteLLM's per-token USD; dated the day the config was read)",
        {model: Price.from_litellm(costs, where)},
        name=where,
    )


def _entry(
    i: int, entry: Any, where: str, defaults: Mapping[str, Any], loaded: Loaded
) -> tuple[int | None, Route]:
    here = f"{where}[{i}]"
    if not isinstance(entry, Mapping) or "model_name" not in entry:
        raise ConfigError(f"{here}: each entry needs model_name and litellm_params")
    params = dict(entry.get("litellm_params") or {})
    if "model" not in params:
        raise ConfigError(f"{here}.litellm_params: model is missing")
    info = dict(entry.get("model_info") or {})
    own: dict[str, Any] = {}
    for key in ("rpm", "tpm"):
        for place, source in ((here, entry), (f"{here}.litellm_params", params)):
            if key in source:
                own[key] = _count(source[key], f"{place}.{key}") or None
        params.pop(key, None)
    order = params.pop("order", None)
    if order is not None:
        order = _count(order, f"{here}.litellm_params.order")
    for key in ("max_retries", "num_retries"):
        if key in params:
            own["retry"] = _retry(params.pop(key), f"{here}.litellm_params.{key}")
    for key, why in _DEPLOYMENT_NOTES.items():
        if key in params or key in entry:
            params.pop(key, None)
            loaded.notes.append(f"{here}: {key} is not applied: {why}")
    costs = {k: params.pop(k) for k in list(params) if k in _COST_KEYS or "_above_" in k}
    costs.update({k: v for k, v in info.items() if k in _COST_KEYS or "cost_per_token_above" in k})
    if costs:
        _complete(costs, str(info.get("base_model") or params.get("model") or ""), here, loaded)
    # Every other key is passed to LiteLLM as written (a provider's own: vertex_project,
    # aws_region_name, ...), as LiteLLM's Router passes litellm_params.
    for key in list(params):
        reason = _ROUTER_ONLY.get(key)
        if reason is None and key.startswith("health_check"):
            reason = "health checks are the proxy's; router.preflight() checks routes"
        if reason is not None:
            params.pop(key)
            loaded.notes.append(f"{here}.litellm_params.{key} is not applied: {reason}")
    for key in sorted(info):
        if key in _MODEL_INFO_READ or key in _CAPABILITY_KEYS or key in costs:
            continue
        loaded.notes.append(
            f"{here}.model_info.{key} is not applied: informational to LiteLLM's proxy"
        )
    base_model = info.get("base_model")
    if isinstance(base_model, str) and base_model:
        # What the deployment really is, for its capabilities, prices and reach.
        params["model_info"] = {**dict(params.get("model_info") or {}), "base_model": base_model}
    for key, value in defaults.items():
        params.setdefault(key, value)
    read = from_environment(params, loaded.env)
    params = {
        k: secret(v, f"{here}.litellm_params.{k}", loaded.missing, loaded.env)
        for k, v in params.items()
    }
    model = params.pop("model")
    capabilities = {ours: bool(info[k]) for k, ours in _CAPABILITY_KEYS.items() if k in info}
    mode = info.get("mode")
    if mode is not None:
        if mode not in MODES:
            loaded.notes.append(
                f"{here}.model_info.mode {mode!r} is not served by policy_router "
                f"({', '.join(MODES)} are); the route is left to what LiteLLM knows"
            )
        else:
            capabilities.update({c.value: True for c in MODES[mode]})
    limit = info.get("max_output_tokens")
    # LiteLLM Router's pre-call check reads the window from litellm_params or model_info.
    window = params.pop("max_input_tokens", None) or info.get("max_input_tokens")
    route = Route(
        model,
        group=str(entry["model_name"]),
        id=str(info["id"]) if info.get("id") else None,
        reach=info.get("reach"),
        capabilities=capabilities or None,
        prices=_prices(costs, model, f"{here} model_info") if costs else None,
        output_limit=limit if isinstance(limit, int) and limit > 0 else None,
        context_window=window if isinstance(window, int) and window > 0 else None,
        secrets=read,
        **own,
        **{k: v for k, v in params.items() if v is not None},
    )
    return order, route


def model_list_routes(
    model_list: Sequence[Mapping[str, Any]],
    *,
    where: str = "model_list",
    defaults: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Loaded:
    """Routes from LiteLLM Router's own `model_list` (see the module docstring).

    `defaults` are LiteLLM kwargs every route gets unless its entry sets them (a
    `router_settings.timeout`, say). Within a group, entries with an `order` come first,
    lowest first; the rest keep their written order.
    """
    if not isinstance(model_list, Sequence) or isinstance(model_list, str):
        raise ConfigError(f"{where} must be a list of deployments with model_name")
    loaded = Loaded(routes=[], env=dict(env or {}))
    ordered: list[tuple[int, int, Route]] = []
    for i, entry in enumerate(model_list):
        try:
            order, route = _entry(i, entry, where, defaults or {}, loaded)
        except ConfigError as error:
            text = str(error)
            raise ConfigError(text if text.startswith(where) else f"{where}[{i}]: {text}") from None
        ordered.append((order if order is not None else 1 << 30, i, route))
    loaded.routes = [r for _, _, r in sorted(ordered, key=lambda t: (t[0], t[1]))]
    return loaded


