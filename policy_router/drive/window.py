"""The context window as a requirement: a prompt that cannot fit a route is not sent there.

A route's window is what it declares (`Route(context_window=...)`) or LiteLLM's
`max_input_tokens` for its model. The prompt plus the largest reply cap the call sets must
fit it, and the cap must not pass the model's output limit (`Route(output_limit=...)`,
else LiteLLM's `max_output_tokens`), else the route is skipped before anything is sent:
"prompt 150,211 tokens + reply cap 4,000 > window 128,000". Measuring costs nothing on the common call: the prompt's UTF-8
bytes bound its tokens (no tokenizer makes more tokens than bytes), so a prompt whose bytes
fit every window is never counted; only one that may not fit is counted, by LiteLLM's
counter for the route's model where LiteLLM bundles that tokenizer (OpenAI's, Anthropic's),
else its default one, and never a tokenizer that would be downloaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import litellm

from ..endpoints import Endpoint
from ..ground.records import Check, Skip
from ..policies.bounds import reply_tokens, utf8_bytes
from ..policies.candidate import Candidate

__all__ = ["fits", "fitted"]

# Providers whose tokenizer LiteLLM ships in its package: counted for their own model.
_BUNDLED = frozenset({"openai", "azure", "anthropic", "text-completion-openai"})


def fitted(
    endpoint: Endpoint,
    kwargs: Mapping[str, Any],
    sifted: tuple[Sequence[Candidate], Sequence[Skip]],
) -> tuple[Sequence[Candidate], Sequence[Skip]]:
    """`sifted` with the routes whose window the prompt cannot fit, or whose output limit
    the call's reply cap passes, moved to the skips (the same tuple when every route may
    take it, as almost every call does)."""
    eligible, skips = sifted
    windows = [c.window for c in eligible if c.window is not None]
    outputs = [c.most_reply for c in eligible if c.most_reply is not None]
    if not windows and not outputs:
        return sifted
    cap = (reply_tokens(kwargs, *endpoint.reply_caps) or 0) if endpoint.generates else 0
    size = sum(utf8_bytes(kwargs[t]) for t in endpoint.prompt if kwargs.get(t) is not None)
    if (not windows or size + cap <= min(windows)) and (not outputs or cap <= min(outputs)):
        return sifted
    kept: list[Candidate] = []
    more: list[Skip] = []
    counted: dict[str, int] = {}
    for c in eligible:
        if c.most_reply is not None and cap > c.most_reply:
            more.append(
                Skip(
                    c.name,
                    Check.CONTEXT_WINDOW,
                    f"reply cap {cap:,} tokens > the model's output limit {c.most_reply:,}",
                    {"cap": cap, "output_limit": c.most_reply},
                )
            )
            continue
        if c.window is None or size + cap <= c.window:
            kept.append(c)
            continue
        model = c.route.model if c.route.provider in _BUNDLED else ""
        if model not in counted:
            counted[model] = _tokens(model, endpoint, kwargs)
        tokens = counted[model]
        if tokens + cap <= c.window:
            kept.append(c)
            continue
        reply = f" + reply cap {cap:,}" if cap else ""
        more.append(
            Skip(
                c.name,
                Check.CONTEXT_WINDOW,
                f"prompt {tokens:,} tokens{reply} > window {c.window:,}",
                {"tokens": tokens, "cap": cap, "window": c.window},
            )
        )
    if not more:
        return sifted
    return tuple(kept), (*skips, *more)


def fits(
    candidate: Candidate,
    endpoint: Endpoint,
    kwargs: Mapping[str, Any],
    sifted: tuple[Sequence[Candidate], Sequence[Skip]],
) -> bool:
    """Whether every route of `sifted` may take the prompt (`candidate`, the express lane's,
    with no window and no output limit known: yes at once)."""
    if candidate.window is None and candidate.most_reply is None:
        return True
    return fitted(endpoint, kwargs, sifted) is sifted


def _tokens(model: str, endpoint: Endpoint, kwargs: Mapping[str, Any]) -> int:
    """The prompt's tokens by LiteLLM's counter (for `model` when given, else its default
    tokenizer); the bytes when it cannot count them (a bound, on the safe side)."""
    try:
        if endpoint.prompt == ("messages",):
            return int(
                litellm.token_counter(
                    model=model, messages=kwargs.get("messages") or [],
                    tools=kwargs.get("tools") or None,
                )
            )
        text = " ".join(str(kwargs[t]) for t in endpoint.prompt if kwargs.get(t) is not None)
        return int(litellm.token_counter(model=model, text=text))
    except Exception:
        return sum(utf8_bytes(kwargs[t]) for t in endpoint.prompt if kwargs.get(t) is not None)
