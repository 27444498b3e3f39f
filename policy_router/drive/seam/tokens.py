"""A prompt's tokens as LiteLLM counts them, for the context-window rule
(`policies.window`): by the route's own tokenizer where LiteLLM bundles it (OpenAI's,
Anthropic's), else its default one, and never a tokenizer that would be downloaded.
Images are counted as LiteLLM counts them (never fetched)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import litellm

from ...ground.route import Route
from ...policies.bounds import IMAGE_TOKENS, prompt_bound, utf8_bytes
from . import model_info

__all__ = ["counter"]

# Providers whose tokenizer LiteLLM ships in its package: counted for their own model.
_BUNDLED = frozenset({"openai", "azure", "anthropic", "text-completion-openai"})


def counter(prompt: Sequence[str], kwargs: Mapping[str, Any]) -> Callable[[Route], int]:
    """`count(route)`: the tokens of the prompt carried by `kwargs` under the keywords
    `prompt` names, as `route`'s tokenizer counts them; counted once per tokenizer."""
    counted: dict[str, int] = {}

    def count(route: Route) -> int:
        model = route.model if route.provider in _BUNDLED else ""
        if model not in counted:
            counted[model] = _tokens(model, prompt, kwargs)
        return counted[model]

    return count


def _tokens(model: str, prompt: Sequence[str], kwargs: Mapping[str, Any]) -> int:
    """The prompt's tokens by LiteLLM's counter (for `model` when given, else its default
    tokenizer): messages with their images, the tools' schemas, and the `response_format`
    schema as its bytes; the bytes of it all when it cannot count them (on the safe side)."""
    try:
        schema = kwargs.get("response_format")
        extra = 0 if schema is None else utf8_bytes(model_info.response_format_schema(schema))
        if tuple(prompt) == ("messages",):
            tools = kwargs.get("tools") or kwargs.get("functions") or None
            return extra + int(
                litellm.token_counter(
                    model=model, messages=kwargs.get("messages") or [], tools=tools,
                    use_default_image_token_count=False,
                )
            )
        text = " ".join(str(kwargs[t]) for t in prompt if kwargs.get(t) is not None)
        return extra + int(litellm.token_counter(model=model, text=text))
    except Exception:
        found = prompt_bound(kwargs, IMAGE_TOKENS, texts=prompt)
        if found is not None:
            return found
        return sum(utf8_bytes(kwargs[t]) for t in prompt if kwargs.get(t) is not None)
