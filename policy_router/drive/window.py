"""The context window as a requirement: a prompt that cannot fit a route is not sent there.

A route's window is what it declares (`Route(context_window=...)`) or LiteLLM's
`max_input_tokens` for its model. The prompt plus the largest reply cap the call sets must
fit it, and the cap must not pass the model's output limit (`Route(output_limit=...)`,
else LiteLLM's `max_output_tokens`), else the route is skipped before anything is sent:
"prompt 150,211 tokens + reply cap 4,000 > window 128,000". The reply cap is the largest
the request sends: the call's, or the route's own default beside it.

What is measured is what is sent: the messages, the tools' schemas, the JSON schema of a
`response_format`, and each image part. Measuring costs nothing on the common call: the
prompt's bound (`policies.bounds.prompt_bound`: UTF-8 bytes, which no tokenizer exceeds,
tools and images at their most) fits every window, so nothing is counted; only a prompt that
may not fit is counted, by LiteLLM's counter (messages, images and tools) for the route's
model where LiteLLM bundles that tokenizer (OpenAI's, Anthropic's), else its default one,
and never a tokenizer that would be downloaded. Images are counted as LiteLLM counts them
(never fetched); the provider's own "too long" then moves the request to a larger window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import litellm

from ..endpoints import Endpoint
from ..ground.records import Check, Skip
from ..policies.bounds import IMAGE_TOKENS, prompt_bound, reply_tokens, utf8_bytes
from ..policies.candidate import Candidate
from . import model_info

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
    call_cap = (reply_tokens(kwargs, *endpoint.reply_caps) or 0) if endpoint.generates else 0
    caps = {c.id: _cap(c, endpoint, kwargs, call_cap) for c in eligible}
    most = max(caps.values(), default=0)
    bound = prompt_bound(
        kwargs, IMAGE_TOKENS, texts=endpoint.prompt, schema_of=model_info.response_format_schema
    ) if windows else None  # only a window needs the prompt's size
    if (
        (not windows or (bound is not None and bound + most <= min(windows)))
        and (not outputs or most <= min(outputs))
    ):
        return sifted
    kept: list[Candidate] = []
    more: list[Skip] = []
    counted: dict[str, int] = {}
    for c in eligible:
        cap = caps[c.id]
        if c.most_reply is not None and cap > c.most_reply:
            more.append(
                Skip(
                    c.name,
                    Check.CONTEXT_WINDOW,
                    f"reply cap {cap:,} tokens > the model's output limit {c.most_reply:,}",
                    detail={"cap": cap, "output_limit": c.most_reply},
                )
            )
            continue
        if c.window is None or (bound is not None and bound + cap <= c.window):
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
                detail={"tokens": tokens, "cap": cap, "window": c.window},
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


def _cap(c: Candidate, endpoint: Endpoint, kwargs: Mapping[str, Any], call_cap: int) -> int:
    """The largest reply cap the request sends to `c`: the call's, and the route's own
    default caps beside it (a cap the call sets under the same name replaces the route's)."""
    if not endpoint.generates or c.sent_cap is None:
        return call_cap
    return reply_tokens({**c.route.kwargs, **kwargs}, *endpoint.reply_caps) or 0


def _tokens(model: str, endpoint: Endpoint, kwargs: Mapping[str, Any]) -> int:
    """The prompt's tokens by LiteLLM's counter (for `model` when given, else its default
    tokenizer): messages with their images, the tools' schemas, and the `response_format`
    schema as its bytes; the bytes of it all when it cannot count them (on the safe side)."""
    try:
        schema = kwargs.get("response_format")
        extra = 0 if schema is None else utf8_bytes(model_info.response_format_schema(schema))
        if endpoint.prompt == ("messages",):
            tools = kwargs.get("tools") or kwargs.get("functions") or None
            return extra + int(
                litellm.token_counter(
                    model=model, messages=kwargs.get("messages") or [], tools=tools,
                    use_default_image_token_count=False,
                )
            )
        text = " ".join(str(kwargs[t]) for t in endpoint.prompt if kwargs.get(t) is not None)
        return extra + int(litellm.token_counter(model=model, text=text))
    except Exception:
        found = prompt_bound(kwargs, IMAGE_TOKENS, texts=endpoint.prompt)
        if found is not None:
            return found
        return sum(utf8_bytes(kwargs[t]) for t in endpoint.prompt if kwargs.get(t) is not None)
