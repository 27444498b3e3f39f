"""LiteLLM's model map, read as data: which models LiteLLM lists, under which provider,
at what price per token.

The ground may not import LiteLLM (only the drivers talk to it), yet a route's inferred
reach and a price table imported from LiteLLM depend on what LiteLLM's map says. The map is
a JSON file the litellm package ships (`model_prices_and_context_window_backup.json`); it is
located with `importlib.util.find_spec`, which finds a package without running it, and read
once (~3.4 MB). Those are the rates `litellm_version()` names, whether or not LiteLLM
fetched a newer map when it was imported (it does unless `LITELLM_LOCAL_MODEL_COST_MAP=True`).

For reach, where a listed model means a vendor's, the safe side is to know more: a model
counts as listed when either the shipped map or the map a running LiteLLM holds
(`litellm.model_cost`, read only when LiteLLM is already imported) lists it.
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Iterable, Mapping
from functools import lru_cache
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = [
    "bundled",
    "close_models",
    "cost_map_entry",
    "cost_map_rows",
    "deprecation_date",
    "listed",
    "litellm_version",
]

_SHIPPED = "model_prices_and_context_window_backup.json"


@lru_cache(maxsize=1)
def bundled() -> Mapping[str, Any]:
    """LiteLLM's price and context-window map as the installed litellm package ships it."""
    spec = find_spec("litellm")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / _SHIPPED
        if path.is_file():
            data = json.loads(path.read_bytes())
            return data if isinstance(data, dict) else {}
    raise ConfigError(f"the installed litellm package ships no {_SHIPPED}; reinstall litellm")


def litellm_version() -> str:
    """The installed litellm's version, which names the shipped map's rates."""
    return version("litellm")


def _maps() -> Iterable[Mapping[str, Any]]:
    yield bundled()
    running = sys.modules.get("litellm")
    live = getattr(running, "model_cost", None)
    if isinstance(live, Mapping):
        yield live


def listed(names: Iterable[str]) -> str | None:
    """The provider LiteLLM lists the first of `names` it knows under (`openai` for
    `gpt-4o`), or None when it lists none of them, in the shipped map or a running one.

    Pass every name a route's model may go by: the model string, the name after its
    provider prefix, a `base_model`.
    """
    wanted = [n for n in names if n]
    for cost_map in _maps():
        for name in wanted:
            entry = cost_map.get(name)
            if isinstance(entry, Mapping):
                return str(entry.get("litellm_provider") or "unknown")
    return None


def close_models(model: str, n: int = 3) -> list[str]:
    """Models LiteLLM lists whose names are close to `model` (a typo's likely meaning),
    under the same provider prefix when `model` has one."""
    provider, _, name = model.rpartition("/")
    pool = set()
    for key, entry in bundled().items():
        if not isinstance(entry, Mapping):
            continue
        owner = str(entry.get("litellm_provider") or "")
        bare = key.split("/", 1)[1] if "/" in key else key
        if not provider:
            pool.add(key)
        elif owner == provider or key.startswith(f"{provider}/"):
            pool.add(f"{provider}/{bare}")
    return difflib.get_close_matches(model if provider else name, sorted(pool), n=n, cutoff=0.8)


def cost_map_entry(model: str, provider: str | None = None) -> tuple[str, dict[str, Any]]:
    """LiteLLM's cost-map entry for `model`, as `(row key, entry)`: the row key is the
    LiteLLM model string to price (`gemini/gemini-2.5-pro`), the entry its per-token floats.

    The provider is checked: `gemini-2.5-pro` with provider "gemini" is Google AI Studio's
    row (`gemini/gemini-2.5-pro`), not the bare key's, which is Vertex's. A bare name with
    no provider takes the map's own and says so in the row key. A model the map does not
    know raises `ConfigError` naming close matches. Read from the shipped map only, so a
    table labelled with a litellm version carries exactly that version's rates.
    """
    cost_map = bundled()
    if "/" in model and provider is None:
        provider, name = model.split("/", 1)
    else:
        name = model
    keys = [f"{provider}/{name}", name] if provider else [name]
    for key in keys:
        entry = cost_map.get(key)
        if not isinstance(entry, dict) or entry.get("input_cost_per_token") is None:
            continue
        owner_listed = str(entry.get("litellm_provider") or "")
        if (
            provider is None
            or provider in owner_listed.split("-")
            or owner_listed.startswith(provider)
        ):
            owner = provider or owner_listed.split("-language-models")[0]
            return f"{owner}/{name}", dict(entry)
    pool = [
        f"{provider}/{k.split('/', 1)[-1]}" if provider else k
        for k, v in cost_map.items()
        if isinstance(v, dict)
        and (provider is None or str(v.get("litellm_provider") or "").startswith(provider))
    ]
    target = f"{provider}/{name}" if provider else name
    close = difflib.get_close_matches(target, sorted(set(pool)), n=5)
    hint = f"; close matches: {', '.join(close)}" if close else ""
    where = f" for provider {provider!r}" if provider else ""
    raise ConfigError(f"LiteLLM's cost map has no prices for {name!r}{where}{hint}")


def cost_map_rows(models: list[str]) -> dict[str, dict[str, Any]]:
    """LiteLLM's cost-map entries for `models` (its per-token floats, as it keeps them),
    by each model's row key (see `cost_map_entry`)."""
    return dict(cost_map_entry(m) for m in models)


def deprecation_date(model: str) -> str | None:
    """The date LiteLLM's shipped map gives for the model's deprecation, if any (ISO text).

    Read from the map itself: `litellm.get_model_info` leaves the field out (1.110.2).
    """
    try:
        _, entry = cost_map_entry(model)
    except ConfigError:
        return None
    value = entry.get("deprecation_date")
    return str(value) if value else None
