"""A LiteLLM proxy `config.yaml`, loaded faithfully: its `model_list` (see `litellm.py`),
`include:` files, `environment_variables:`, `router_settings` and `litellm_settings`; the
proxy server's own sections (`general_settings`, `guardrails`, `mcp_servers`,
`files_settings`, ...) are listed as not applied, and a misspelt section the router reads
(`router_setings`) is refused with the name it resembles.

- `router_settings`: `routing_strategy` maps to an order, `num_retries` to `Retry`,
  `allowed_fails`/`cooldown_time` to the `Breaker`, `timeout` to every route's default
  timeout, `redis_*` to a shared `RedisStore`; `litellm_settings`: `num_retries`,
  `request_timeout` and `drop_params` likewise (router_settings wins where both set one,
  and `check()` says so);
- a wildcard deployment (`model_name: openai/*`) is listed, not routed: it cannot be priced
  or checked before sending.

Every other setting is listed by `router.check()` with its place, never dropped in silence.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..ground.errors import ConfigError
from ..policies.breaker import Breaker
from .litellm import Loaded, _count, _retry, model_list_routes, secret

__all__ = ["is_proxy_config", "proxy_config"]


_STRATEGIES = {
    "simple-shuffle": "round_robin",
    "least-busy": "least_busy",
    "usage-based-routing": "most_headroom",
    "usage-based-routing-v2": "most_headroom",
    "latency-based-routing": "fastest",
    "cost-based-routing": "cheapest",
}



# The sections this loader applies (general_settings is listed as not applied).
_READ = frozenset(
    {"model_list", "router_settings", "litellm_settings", "environment_variables", "include"}
)
# Sections of a LiteLLM proxy config that configure the proxy server itself (guardrails,
# MCP servers, files, fine-tuning, ...), as the example configs in the litellm package
# write them (1.110.2): listed by `check()` as not applied.
_PROXY_SECTIONS = frozenset({
    "general_settings", "guardrails", "mcp_servers", "mcp_tools", "files_settings",
    "finetune_settings", "search_tools", "sandbox_tools", "policies", "policy_attachments",
    "credential_list", "vector_store_registry", "assistant_settings", "callback_settings",
    "prompts", "agent_list", "batch_settings", "model_group_alias", "pass_through_endpoints",
    "ui_settings", "alerting_settings", "scim_settings", "sso_settings",
})

# LiteLLM Router's own meta-deployments: a model string of these picks another deployment.
_META_PROVIDERS = frozenset({"auto_router"})

_FALLBACK_NOTE = (
    "the router falls back within a group: list the fallback deployments under the same "
    "model_name"
)



def is_proxy_config(data: Mapping[str, Any]) -> bool:
    """A LiteLLM proxy config.yaml (or a bare model_list mapping), not a policy file."""
    return "model_list" in data and "groups" not in data



def _included(data: Mapping[str, Any], base: Path | None, source: str) -> dict[str, Any]:
    """The config with the files its `include:` names (relative to the config's folder)
    merged in, as LiteLLM's proxy does: their model_lists appended, their sections added."""
    names = data.get("include") or []
    if not names:
        return dict(data)
    if isinstance(names, str):
        names = [names]
    merged = {k: v for k, v in data.items() if k != "include"}
    merged["model_list"] = list(merged.get("model_list") or [])
    for name in names:
        path = Path(str(name))
        path = path if path.is_absolute() or base is None else base / path
        try:
            text = path.read_text()
        except OSError as error:
            raise ConfigError(f"{source}: include {name!r}: cannot read {path} ({error.strerror})") from None
        from ..policies.price_table import load_yaml

        part = load_yaml(text, path)
        if not isinstance(part, Mapping):
            raise ConfigError(f"{source}: include {name!r}: {path} is not a mapping")
        merged["model_list"].extend(part.get("model_list") or [])
        for key, value in part.items():
            if key != "model_list":
                merged.setdefault(key, value)
    return merged



def proxy_config(
    data: Mapping[str, Any], source: str = "config", *, base: Path | None = None
) -> Loaded:
    """A LiteLLM proxy `config.yaml`: its deployments and the settings that apply.

    `include:` files are merged in; `environment_variables:` are the file's own values for
    its `os.environ/NAME` references (the process's environment is not changed)."""
    data = _included(data, base, source)
    notes: list[str] = []
    for key in sorted(set(data) - _READ - {"general_settings"}):
        close = difflib.get_close_matches(str(key), sorted(_READ), n=1, cutoff=0.75)
        if close:  # a section the router reads, misspelt: refused, never ignored
            raise ConfigError(
                f"{source}: unknown top-level key {key!r}; did you mean {close[0]!r}?"
            )
        why = (
            "a LiteLLM proxy section the router does not apply (the proxy server's own)"
            if key in _PROXY_SECTIONS
            else "not a section policy_router reads (the LiteLLM proxy may: check its spelling)"
        )
        notes.append(f"{key} is not applied: {why}")
    router_settings = dict(data.get("router_settings") or {})
    litellm_settings = dict(data.get("litellm_settings") or {})
    defaults: dict[str, Any] = {}
    policies: dict[str, Any] = {}
    missing: list[str] = []
    # Set in both sections: LiteLLM's Router reads router_settings, which wins; say so.
    for ours, theirs in (("timeout", "request_timeout"), ("num_retries", "num_retries")):
        if ours in router_settings and theirs in litellm_settings:
            notes.append(
                f"litellm_settings.{theirs} ({litellm_settings[theirs]!r}) is not applied: "
                f"router_settings.{ours} ({router_settings[ours]!r}) sets it for the router"
            )
            litellm_settings.pop(theirs)

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
            cooldown=float(cooldown) if cooldown is not None else Breaker().cooldown,
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
    if data.get("general_settings"):
        notes.append("general_settings is not applied: the proxy server's own settings")
    env = data.get("environment_variables") or {}
    if not isinstance(env, Mapping):
        raise ConfigError(f"{source}: environment_variables must be a mapping of NAME: value")
    if "model_list" not in data or not data["model_list"]:
        raise ConfigError(f"{source}: model_list is missing or empty")
    entries = []
    for i, entry in enumerate(data["model_list"]):
        name = str(entry.get("model_name", "")) if isinstance(entry, Mapping) else ""
        if "*" in name:
            notes.append(
                f"model_list[{i}] ({name}) is not applied: a wildcard deployment routes any "
                "model LiteLLM knows, which cannot be priced or checked before sending; list "
                "each model you use as its own entry"
            )
            continue
        params = entry.get("litellm_params") if isinstance(entry, Mapping) else None
        model = str(params.get("model", "")) if isinstance(params, Mapping) else ""
        if model.split("/", 1)[0] in _META_PROVIDERS:
            notes.append(
                f"model_list[{i}] ({name}) is not applied: {model} is a LiteLLM Router "
                "deployment that picks among other model_names itself; here the group's "
                "`order` picks (list the deployments it would pick among under one model_name)"
            )
            continue
        entries.append(entry)
    if not entries:
        raise ConfigError(
            f"{source}: model_list has no deployment the router can send to (only "
            "wildcards or LiteLLM Router's own auto-routers)"
        )
    loaded = model_list_routes(entries, defaults=defaults, env={str(k): str(v) for k, v in env.items()})
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
