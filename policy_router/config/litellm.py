"""LiteLLM's own configuration, loaded faithfully: a Router `model_list`, and a whole proxy
`config.yaml` (`model_list`, `router_settings`, `litellm_settings`, `general_settings`).

Every setting is honoured, mapped to its policy_router equivalent, or reported by
`router.check()` as not applied, with its place (`model_list[2].litellm_params.weight`):
never dropped in silence. An `os.environ/NAME` whose variable is not set is an error naming
NAME, never a call sent with some other key.

What maps to what:

- `model_name` is the group; `litellm_params` the route's LiteLLM kwargs; `model_info`'s
  `supports_*` flags its capabilities, `mode` what it serves (`embedding`, `chat`, ...),
  `max_output_tokens` its output limit, `reach` its reach, `id` its name;
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

from ..ground.capability import MODES
from ..ground.errors import ConfigError
from ..ground.route import Route
from ..policies.breaker import Breaker
from ..policies.price_table import PriceTable
from ..policies.prices import Price
from ..policies.retry import Retry

__all__ = ["Loaded", "is_proxy_config", "model_list_routes", "proxy_config"]

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
_STRATEGIES = {
    "simple-shuffle": "round_robin",
    "least-busy": "least_busy",
    "usage-based-routing": "most_headroom",
    "usage-based-routing-v2": "most_headroom",
    "latency-based-routing": "fastest",
    "cost-based-routing": "cheapest",
}
_FALLBACK_NOTE = (
    "the router falls back within a group: list the fallback deployments under the same "
    "model_name"
)


@dataclass
class Loaded:
    """What a configuration gives: routes, Router keyword arguments, variables that are
    not set (errors when building a router), and settings not applied (with their place)."""

    routes: list[Route]
    policies: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def from_environment(params: Mapping[str, Any]) -> tuple[str, ...]:
    """The values `params` reads from `os.environ/NAME` references: secrets, whatever the
    keyword that holds them is called, so the router scrubs them from every output."""
    found = []
    for value in params.values():
        if isinstance(value, str) and value.startswith(ENV_PREFIX):
            resolved = os.environ.get(value.removeprefix(ENV_PREFIX))
            if resolved:
                found.append(resolved)
    return tuple(found)


def secret(value: Any, where: str, missing: list[str]) -> Any:
    """Resolve `os.environ/NAME`; record a variable that is not set rather than guess."""
    if isinstance(value, str) and value.startswith(ENV_PREFIX):
        name = value.removeprefix(ENV_PREFIX)
        resolved = os.environ.get(name)
        if resolved is None:
            missing.append(f"{where}: environment variable {name} is not set")
        return resolved
    return value


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where} must be a whole number >= 0, got {value!r}")
    return value


def _retry(value: Any, where: str) -> Retry | None:
    retries = _count(value, where)
    return Retry(attempts=retries + 1) if retries else None


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
    for key, value in defaults.items():
        params.setdefault(key, value)
    read = from_environment(params)
    params = {
        k: secret(v, f"{here}.litellm_params.{k}", loaded.missing) for k, v in params.items()
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
    route = Route(
        model,
        group=str(entry["model_name"]),
        name=str(info["id"]) if info.get("id") else None,
        reach=info.get("reach"),
        capabilities=capabilities or None,
        prices=_prices(costs, model, f"{here} model_info") if costs else None,
        output_limit=limit if isinstance(limit, int) and limit > 0 else None,
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
) -> Loaded:
    """Routes from LiteLLM Router's own `model_list` (see the module docstring).

    `defaults` are LiteLLM kwargs every route gets unless its entry sets them (a
    `router_settings.timeout`, say). Within a group, entries with an `order` come first,
    lowest first; the rest keep their written order.
    """
    if not isinstance(model_list, Sequence) or isinstance(model_list, str):
        raise ConfigError(f"{where} must be a list of deployments with model_name")
    loaded = Loaded([])
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


def is_proxy_config(data: Mapping[str, Any]) -> bool:
    """A LiteLLM proxy config.yaml (or a bare model_list mapping), not a policy file."""
    return "model_list" in data and "groups" not in data


def proxy_config(data: Mapping[str, Any], source: str = "config") -> Loaded:
    """A LiteLLM proxy `config.yaml`: its deployments and the settings that apply."""
    unknown = sorted(
        set(data)
        - {
            "model_list",
            "router_settings",
            "litellm_settings",
            "general_settings",
            "environment_variables",
            "include",
        }
    )
    if unknown:
        raise ConfigError(
            f"{source}: unknown top-level key {unknown[0]!r}; a LiteLLM proxy config has "
            "model_list, router_settings, litellm_settings, general_settings"
        )
    router_settings = dict(data.get("router_settings") or {})
    litellm_settings = dict(data.get("litellm_settings") or {})
    defaults: dict[str, Any] = {}
    policies: dict[str, Any] = {}
    notes: list[str] = []
    missing: list[str] = []

    timeout = router_settings.pop("timeout", litellm_settings.pop("request_timeout", None))
    if timeout is not None:
        defaults["timeout"] = timeout
    if litellm_settings.pop("drop_params", None):
        defaults["drop_params"] = True
    retries = router_settings.pop("num_retries", litellm_settings.pop("num_retries", None))
    if retries is not None:
        policies["retry"] = _retry(retries, "router_settings.num_retries")
    strategy = router_settings.pop("routing_strategy", None)
    if strategy is not None:
        if strategy not in _STRATEGIES:
            raise ConfigError(
                f"{source}: router_settings.routing_strategy {strategy!r} is not one of "
                f"{', '.join(sorted(_STRATEGIES))}"
            )
        policies["order"] = _STRATEGIES[strategy]
        if strategy == "simple-shuffle":
            notes.append(
                "router_settings.routing_strategy: simple-shuffle is applied as round_robin "
                "(load spreads in turn, not at random)"
            )
    fails = router_settings.pop("allowed_fails", None)
    cooldown = router_settings.pop("cooldown_time", None)
    if fails is not None or cooldown is not None:
        policies["breaker"] = Breaker(
            failures=_count(fails, "router_settings.allowed_fails") + 1 if fails is not None else 3,
            cooldown=float(cooldown) if cooldown is not None else 30.0,
        )
    redis = {k: router_settings.pop(k) for k in list(router_settings) if k.startswith("redis_")}
    if redis:
        policies["store"] = _redis(redis, missing)
    for key in ("fallbacks", "context_window_fallbacks", "content_policy_fallbacks", "default_fallbacks"):
        for section, settings in (("router_settings", router_settings), ("litellm_settings", litellm_settings)):
            if settings.pop(key, None) is not None:
                notes.append(f"{section}.{key} is not applied: {_FALLBACK_NOTE}")
    for key in router_settings:
        notes.append(f"router_settings.{key} is not applied by policy_router")
    for key in litellm_settings:
        why = (
            "register LiteLLM callbacks in your own code; they fire once per attempt"
            if "callback" in key
            else "a LiteLLM proxy setting policy_router does not read"
        )
        notes.append(f"litellm_settings.{key} is not applied: {why}")
    for section in ("general_settings", "environment_variables"):
        if data.get(section):
            notes.append(f"{section} is not applied: the proxy server's own settings")
    if "model_list" not in data or not data["model_list"]:
        raise ConfigError(f"{source}: model_list is missing or empty")
    loaded = model_list_routes(data["model_list"], defaults=defaults)
    loaded.policies.update(policies)
    loaded.notes[:0] = notes
    loaded.missing.extend(missing)
    return loaded


def _redis(settings: Mapping[str, Any], missing: list[str]) -> Any:
    from ..state.redis.store import RedisStore

    resolved = {k: secret(v, f"router_settings.{k}", missing) for k, v in settings.items()}
    url = resolved.get("redis_url")
    if url is None:
        host = resolved.get("redis_host") or "127.0.0.1"
        port = resolved.get("redis_port") or 6379
        password = resolved.get("redis_password")
        auth = f":{password}@" if password else ""
        url = f"redis://{auth}{host}:{port}/0"
    return RedisStore(str(url))
