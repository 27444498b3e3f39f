"""What a group can do, said in LiteLLM's model-info words, for callers that ask LiteLLM
(`litellm.supports_function_calling("policy_router/smart")`) before they send.

A group can serve what at least one of its routes can: the router picks that route for a
request that needs it. So each `supports_*` flag is the union of the routes' capabilities,
the context window and the output limit are the largest known, and the price is the
cheapest route's (an estimate of what a call costs, not a promise: the router's journeys
and budget say what was charged). A group with no route whose capabilities are known says
only its mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from ..ground.capability import Capability
from .candidate import Candidate
from .capabilities import INFO_KEYS

__all__ = ["group_info"]

_MODE_OF = (
    (Capability.CHAT, "chat"),
    (Capability.EMBEDDING, "embedding"),
    (Capability.RESPONSES, "responses"),
    (Capability.COMPLETION, "completion"),
)


def group_info(candidates: Sequence[Candidate], provider: str) -> dict[str, Any]:
    """LiteLLM's model info for a group of `candidates`, served by custom provider
    `provider` (see the module docstring)."""
    known = [c for c in candidates if c.capabilities.known]
    have = frozenset().union(*(c.capabilities.have for c in known)) if known else frozenset()
    mode = next((m for cap, m in _MODE_OF if cap in have), "chat")
    info: dict[str, Any] = {"litellm_provider": provider, "mode": mode}
    for capability, key in INFO_KEYS.items():
        info[key] = capability in have
    info["supports_tool_choice"] = Capability.TOOLS in have
    info["supports_native_streaming"] = Capability.STREAMING in have
    windows = [c.window for c in known if c.window is not None]
    outputs = [c.most_reply for c in known if c.most_reply is not None]
    if windows:
        info["max_input_tokens"] = max(windows)
    if outputs:
        info["max_output_tokens"] = info["max_tokens"] = max(outputs)
    priced = [
        c for c in known
        if c.price is not None and getattr(c.route.prices, "currency", None) == "USD"
    ]
    if priced:
        cheapest = min(priced, key=lambda c: (c.price.input + c.price.output, c.name))  # type: ignore[union-attr]
        price = cheapest.price
        assert price is not None
        per_token = Decimal(10) ** 12  # micro-units per million tokens -> units per token
        info["input_cost_per_token"] = float(Decimal(price.input) / per_token)
        info["output_cost_per_token"] = float(Decimal(price.output) / per_token)
    return info
