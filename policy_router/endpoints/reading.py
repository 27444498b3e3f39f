"""Reading LiteLLM's objects without importing LiteLLM: the usage a response reports, and
whether a stream's first chunk is one LiteLLM made up.

A usage that counts no prompt token measures nothing: LiteLLM fills a reply whose `usage`
is missing or null with `Usage(prompt_tokens=0, completion_tokens=0)` (litellm 1.110.2), and
every request a provider answers has at least one prompt token. Such a reply is read as
having no usage, so it is charged its reservation and counted unmeasured, never as $0.
"""

from __future__ import annotations

from typing import Any

from ..ground.money import Usage

__all__ = [
    "no_choices",
    "cache_hit",
    "counts_of",
    "hidden_of",
    "hit_in",
    "id_of",
    "is_hollow_first_chunk",
    "model_of",
    "reply_of",
    "usage_of",
]


def _field(obj: Any, name: str) -> Any:
    """An attribute that may not be there, without paying for a missing one: LiteLLM's
    pydantic objects answer a missing attribute through `__getattr__` and an exception."""
    if obj is None:
        return None
    fields = getattr(obj, "__dict__", None)
    if isinstance(fields, dict):
        if name in fields:
            return fields[name]
        extra = fields.get("__pydantic_extra__") or getattr(obj, "__pydantic_extra__", None)
        return extra.get(name) if isinstance(extra, dict) else None
    return getattr(obj, name, None)



_NO_TIER = (None, "default", "auto")


def counts_of(response: Any) -> tuple[int, int] | None:
    """The prompt and reply counts of a response whose usage says nothing else (LiteLLM's
    `Usage` with no cache or reasoning detail and no extra field: the common reply), or
    None for any other, which `usage_of` reads. `Usage(*counts)` is what `usage_of` gives."""
    # LiteLLM's `ModelResponse` keeps `usage` among its pydantic extra fields.
    extra = getattr(response, "__pydantic_extra__", None)
    if type(extra) is dict:
        usage = extra.get("usage")
        if extra.get("service_tier") not in _NO_TIER:
            return None  # billed in a tier of its own: `usage_of` reads it
    else:
        usage = _field(response, "usage")
    counts = getattr(usage, "__dict__", None)
    if not isinstance(counts, dict) or counts.get("__pydantic_extra__"):
        return None
    prompt, completion = counts.get("prompt_tokens"), counts.get("completion_tokens")
    if (
        type(prompt) is not int
        or type(completion) is not int
        or prompt <= 0
        or counts.get("prompt_tokens_details") is not None
        or counts.get("completion_tokens_details") is not None
        or counts.get("cache_creation_input_tokens")
    ):
        return None
    return prompt, completion


def usage_of(response: Any) -> Usage | None:
    """The usage a response or final stream chunk reports, or None when it has none."""
    counts = counts_of(response)
    if counts is not None:
        # No cache or reasoning detail: the common reply.
        return Usage(prompt=counts[0], completion=counts[1])
    usage = _field(response, "usage")
    if usage is None:
        return None
    prompt = _field(usage, "prompt_tokens")
    completion = _field(usage, "completion_tokens")
    details = _field(usage, "prompt_tokens_details")
    out = _field(usage, "completion_tokens_details")
    if not isinstance(prompt, int) or not isinstance(completion, int) or prompt <= 0:
        return None  # no usage, or LiteLLM's placeholder for a missing one
    cached = _field(details, "cached_tokens") or _field(usage, "cache_read_input_tokens")
    written = _field(usage, "cache_creation_input_tokens") or _field(
        details, "cache_creation_tokens"
    )
    hour = _field(_field(details, "cache_creation_token_details"), "ephemeral_1h_input_tokens")
    reasoning = _field(out, "reasoning_tokens")
    heard, spoken = _field(details, "audio_tokens"), _field(out, "audio_tokens")
    tier = _field(response, "service_tier")
    return Usage(
        prompt=prompt,
        completion=completion,
        cache_read=int(cached or 0),
        cache_write=int(written or 0),
        reasoning=int(reasoning or 0),
        cache_write_1h=hour if isinstance(hour, int) else 0,
        prompt_audio=heard if isinstance(heard, int) else 0,
        completion_audio=spoken if isinstance(spoken, int) else 0,
        tier=tier if isinstance(tier, str) and tier not in ("default", "auto") else "",
    )



def no_choices(response: Any) -> bool:
    """True for a whole answer whose `choices` is an empty list: the provider answered 200
    and said nothing (a chat or text completion; a stream is watched on its own)."""
    fields = getattr(response, "__dict__", None)
    # LiteLLM's responses keep `choices` among their own fields: read with no other frame.
    if type(fields) is dict and "choices" in fields:
        choices = fields["choices"]
    else:
        choices = _field(response, "choices")
    return isinstance(choices, list) and not choices


def is_hollow_first_chunk(chunk: Any) -> bool:
    """True for a first chunk LiteLLM made up because the provider sent no chunk at all.

    Measured with litellm 1.110.2: a stream whose connection closes before any data yields
    one chunk with `finish_reason="stop"`, no role and no content, instead of an error. A
    real first chunk carries the assistant role or some content.
    """
    for choice in getattr(chunk, "choices", None) or ():
        delta = getattr(choice, "delta", None)
        if (
            getattr(delta, "role", None)
            or getattr(delta, "content", None)
            or getattr(delta, "tool_calls", None)
        ):
            return False
    return True


def reply_of(response: Any) -> tuple[Any, bool, tuple[int, int] | None, str | None]:
    """What the router reads of an answer, in one step for LiteLLM's common reply: its hidden
    params (`hidden_of`), whether LiteLLM answered from its cache (`hit_in`), its prompt and
    reply counts when its usage says nothing else (`counts_of`; None: read the endpoint's
    usage), and the model it says answered (`model_of`). Any other object is read by those
    functions, with the same result."""
    fields = getattr(response, "__dict__", None)
    private = getattr(response, "__pydantic_private__", None)
    hidden = private.get("_hidden_params") if type(private) is dict else None
    if type(fields) is not dict or type(hidden) is not dict or "model" not in fields:
        hidden = hidden_of(response)
        return hidden, hit_in(hidden), counts_of(response), model_of(response)
    model = fields["model"]
    return (
        hidden,
        hidden.get("cache_hit") is True,
        counts_of(response),
        model if isinstance(model, str) and model else None,
    )


def hidden_of(response: Any) -> Any:
    """A response's `_hidden_params` (where LiteLLM keeps what it knows of the call), or None.

    A pydantic private attribute is answered by `BaseModel.__getattr__` after the normal
    lookup fails; read from the private slot first, where LiteLLM's models keep it."""
    private = getattr(response, "__pydantic_private__", None)
    if isinstance(private, dict):
        hidden = private.get("_hidden_params")
        if hidden is not None:
            return hidden
    return getattr(response, "_hidden_params", None)


def cache_hit(response: Any) -> bool:
    """True when LiteLLM answered from its own cache (its `_hidden_params` say so)."""
    return hit_in(hidden_of(response))


def hit_in(hidden: Any) -> bool:
    """Whether hidden params (`hidden_of`) say LiteLLM answered from its cache."""
    if isinstance(hidden, dict):
        return hidden.get("cache_hit") is True
    return getattr(hidden, "cache_hit", None) is True


def model_of(response: Any) -> str | None:
    """The model a response says answered it (`gpt-4o-mini-2024-07-18`), if it says."""
    model = _field(response, "model")
    return model if isinstance(model, str) and model else None


def id_of(response: Any) -> str | None:
    """The id a response says it has (`resp_...`), if it says."""
    made = _field(response, "id")
    return made if isinstance(made, str) and made else None
