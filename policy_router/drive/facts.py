"""Measuring a request for a price decision: what it may cost before it is sent.

The planner says what is to be measured (a token count to order routes by price, bounds
to hold a budget); this reads it from the call's keyword arguments, once per request,
with LiteLLM's own token counter and response-format schemas (`drive.prompt`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..endpoints import Endpoint
from ..policies.bounds import (
    RequestFacts,
    batch_size,
    choice_count,
    prediction_tokens,
    reply_tokens,
    unbounded_reason,
)
from .prompt import Prompt

__all__ = ["measured"]


def measured(
    endpoint: Endpoint,
    kwargs: Mapping[str, Any],
    *,
    count: bool,
    bounded: bool,
    image_tokens: int,
    prompt: Prompt | None = None,
) -> RequestFacts:
    """The request's facts: its prompt's token count when `count` (prices order the
    routes), the bound on its prompt when `bounded` (a budget or a tpm limit holds it, each
    image counted as `image_tokens`), and always its reply caps, choices, predicted output
    and batch size. A prompt that cannot be bounded says why (`unbounded`). `prompt` is the
    request's prompt as the other checks measure it (`drive.prompt`), when they do."""
    prompt = prompt or Prompt(endpoint, kwargs)
    bound = prompt.bound(image_tokens) if bounded else 0
    return RequestFacts(
        prompt_tokens=prompt.tokens() if count else 0,
        prompt_bound=bound,
        reply_tokens=reply_tokens(kwargs, *endpoint.reply_caps) if endpoint.generates else 0,
        choices=choice_count(kwargs, *endpoint.choices),
        reply_extra=prediction_tokens(kwargs),
        batch=batch_size(kwargs, endpoint.batch),
        unbounded=unbounded_reason(kwargs, endpoint.prompt) if bound is None else "",
        generates=endpoint.generates,
    )
