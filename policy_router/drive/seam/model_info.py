"""What LiteLLM knows of a model and a call: its model info, the schema it derives from a
`response_format`, its token count, the keyword arguments it understands.

Asked when a router is built or a request planned, and handed to the policies as data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import litellm

from ...ground.route import Route

__all__ = ["base_model", "count_tokens", "litellm_kwargs", "model_info", "response_format_schema"]


def base_model(route: Route) -> str | None:
    """The model a deployment really is (`model_info.base_model`, or `base_model`), as a
    LiteLLM proxy config names it for an Azure deployment: `azure/gpt-4o`."""
    info = route.kwargs.get("model_info")
    named = info.get("base_model") if isinstance(info, Mapping) else None
    named = named or route.kwargs.get("base_model")
    return named if isinstance(named, str) and named else None


def model_info(route: Route) -> tuple[dict[str, Any] | None, bool]:
    """LiteLLM's model info for the route (None when unknown), and native streaming; for a
    deployment LiteLLM does not know by name, its `base_model`'s."""
    provider = route.kwargs.get("custom_llm_provider") or route.provider or None
    info = None
    for name, given in ((route.model, provider), (base_model(route), None)):
        if name is None:
            continue
        try:
            info = litellm.get_model_info(name, custom_llm_provider=given)
            break
        except Exception:
            # Unknown to LiteLLM's map: the caller decides what an unknown model means.
            continue
    if info is None:
        return None, False
    try:
        streams = bool(
            litellm.utils.supports_native_streaming(
                route.model, info.get("litellm_provider") or provider
            )
        )
    except Exception:
        streams = False
    return dict(info), streams


def response_format_schema(response_format: Any) -> Any:
    """What LiteLLM sends for a `response_format` (a pydantic class becomes its JSON
    schema, as `litellm.completion` derives it)."""
    from litellm.llms.base_llm.base_utils import type_to_response_format_param

    return type_to_response_format_param(response_format)



def count_tokens(kwargs: Mapping[str, Any], texts: tuple[str, ...] = ("messages",)) -> int:
    """The prompt's tokens by LiteLLM's token counter with its default tokenizer.

    The same count serves every route of a request, so routes are compared on one measure.
    No model name is passed on purpose: for some names (`llama-3`, `llama-2`, `command-r`,
    `replicate`) LiteLLM tries to download a tokenizer from Hugging Face, which blocked
    23 s here with no network. The default tokenizer is bundled and never downloads.
    `texts` names the prompt's keyword arguments (`messages`, or `input`, `prompt`, ...).
    """
    try:
        if texts == ("messages",):
            return int(
                litellm.token_counter(
                    messages=kwargs.get("messages") or [], tools=kwargs.get("tools") or None
                )
            )
        text = " ".join(
            json.dumps(kwargs[t], default=str) if not isinstance(kwargs[t], str) else kwargs[t]
            for t in texts
            if kwargs.get(t) is not None
        )
        return int(litellm.token_counter(text=text))
    except Exception:
        # Odd content LiteLLM cannot count: the byte length over four is a fair estimate.
        return len(json.dumps([kwargs.get(t) for t in texts], default=str)) // 4



def litellm_kwargs() -> frozenset[str]:
    """Every keyword argument `litellm.completion` understands, for config validation."""
    global _LITELLM_KWARGS
    if _LITELLM_KWARGS is None:
        import inspect

        from litellm.types.utils import all_litellm_params

        names = set(inspect.signature(litellm.completion).parameters) | set(all_litellm_params)
        _LITELLM_KWARGS = frozenset(names - {"model", "messages", "kwargs"})
    return _LITELLM_KWARGS



_LITELLM_KWARGS: frozenset[str] | None = None
