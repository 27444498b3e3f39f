"""A call's arguments, checked before anything is sent: what is surely wrong is refused
with a `ConfigError` that names the field and the fix.

Only what is cheap to check and certain to fail is refused here; everything else goes to
LiteLLM as written. What LiteLLM itself refuses before sending is recognised afterwards
(`failures.classify`), so in neither case does a provider's health or an attempt count
change for a request that never left this process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..ground.deadline import check_seconds, check_timeout
from ..ground.errors import ConfigError
from ..policies.hedge import Hedge
from ..policies.retry import Retry

__all__ = [
    "REFUSED_KWARGS",
    "check_call",
    "check_messages",
    "check_policies",
    "check_policies_of",
    "check_texts",
    "conflicts",
    "unset",
]

# Keywords a caller may not pass: each would let LiteLLM decide what the router decides.
REFUSED_KWARGS = {
    "api_base": "where a call goes is the route's business: set api_base on the Route",
    "base_url": "where a call goes is the route's business: set api_base on the Route",
    "api_key": "credentials belong to a route: set api_key on the Route",
    "custom_llm_provider": "set custom_llm_provider on the Route",
    "fallbacks": "the router decides fallbacks: list the routes in one group",
    "context_window_fallback_dict": "the router decides fallbacks: list the routes in one group",
    "num_retries": "LiteLLM's retries are off: the router sends one request per attempt",
    "max_retries": "LiteLLM's retries are off: the router sends one request per attempt",
}

def conflicts(key: str, value: Any) -> bool:
    """Whether a refused keyword's value would really override the router: `None` (and
    zero retries, which is what the router sends anyway) is no conflict."""
    if value is None:
        return False
    return not (key in ("num_retries", "max_retries") and value == 0 and not isinstance(value, bool))


def unset(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """`kwargs` without the refused keywords passed unset, so that an `api_key=None` from a
    framework never overrides the route's own key."""
    return {k: v for k, v in kwargs.items() if k not in REFUSED_KWARGS or conflicts(k, v)}


_COUNTS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "n", "best_of")


def _count(kwargs: Mapping[str, Any], name: str) -> None:
    value = kwargs.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"{name} must be a whole number >= 1, got {value!r}")


def _text(value: str, where: str) -> None:
    if value.isascii():  # a flag CPython keeps on every string: no surrogate to look for
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = value[error.start : error.end]
        raise ConfigError(
            f"{where} holds {bad!r} at position {error.start}, a lone surrogate that cannot "
            "be sent as UTF-8; decode the text with errors='replace' (or fix its source)"
        ) from None


def _content(content: Any, where: str) -> None:
    if content is None:
        return
    if isinstance(content, str):
        _text(content, where)
        return
    if not isinstance(content, list | tuple):
        raise ConfigError(
            f"{where} must be a string or a list of content parts like "
            f"{{'type': 'text', 'text': ...}}, got {type(content).__name__}"
        )
    for i, part in enumerate(content):
        if isinstance(part, str):
            _text(part, f"{where}[{i}]")
        elif not isinstance(part, Mapping):
            raise ConfigError(
                f"{where}[{i}] must be a content part like {{'type': 'text', 'text': ...}}, "
                f"got {type(part).__name__}"
            )
        elif isinstance(part.get("text"), str):
            _text(part["text"], f"{where}[{i}].text")


def check_messages(messages: Any, name: str = "messages") -> None:
    """A non-empty list of message dicts (or LiteLLM message objects) whose content can be
    sent: a string, None, or a list of content parts, with no lone surrogates."""
    if not isinstance(messages, list | tuple) or not messages:
        raise ConfigError(
            f"{name} must be a non-empty list of {{'role': ..., 'content': ...}} dicts, "
            f"got {type(messages).__name__}"
        )
    for i, m in enumerate(messages):
        if isinstance(m, Mapping):
            _content(m.get("content"), f"{name}[{i}].content")
        elif not hasattr(m, "role"):
            raise ConfigError(
                f"{name}[{i}] must be a dict with 'role' and 'content', got {type(m).__name__}"
            )


_CHECKED = frozenset({*REFUSED_KWARGS, *_COUNTS, "stream", "deadline", "timeout"})


def check_call(kwargs: Mapping[str, Any]) -> None:
    """Refuse malformed call arguments before anything is sent, naming the field and fix.

    The prompt itself is each endpoint's to check (`check_messages`, `check_texts`).
    """
    present = _CHECKED.intersection(kwargs)
    if not present:
        return  # the common call: nothing here to check
    for key in present.intersection(REFUSED_KWARGS):
        if not conflicts(key, kwargs[key]):
            continue  # unset, as frameworks pass it: the router takes it out (`unset`)
        raise ConfigError(f"{key}= is not accepted by the router: {REFUSED_KWARGS[key]}")
    for name in present.intersection(_COUNTS):
        _count(kwargs, name)
    stream = kwargs.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise ConfigError(f"stream must be True or False, got {stream!r}")
    check_seconds(kwargs.get("deadline"), "deadline")
    check_timeout(kwargs.get("timeout"), "timeout")


def check_texts(kwargs: Mapping[str, Any], names: Sequence[str]) -> None:
    """The strings of the prompt arguments `names` (`input`, `prompt`, `instructions`) can
    be sent: no lone surrogates."""
    for name in names:
        value = kwargs.get(name)
        if isinstance(value, str):
            _text(value, name)
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                if isinstance(item, str):
                    _text(item, f"{name}[{i}]")
                elif isinstance(item, Mapping):
                    _content(item.get("content"), f"{name}[{i}].content")


def check_policies(
    budget: Any,
    breaker: Any,
    retry: Any,
    store: Any,
    name: Any,
    stream_failure: Any,
    on_restart: Any,
) -> None:
    """Refuse a Router policy of the wrong type, naming it and the fix."""
    from ..policies.breaker import breaker_of
    from ..policies.budget import Budget
    from ..policies.retry import Retry

    breaker_of(breaker)  # a Breaker, a mapping of its fields, or None; else the error
    for given, kind, what in (
        (budget, Budget, "budget"),
        (retry, Retry, "retry"),
    ):
        if given is not None and not isinstance(given, kind):
            raise ConfigError(f"{what} must be a {kind.__name__}, got {type(given).__name__}")
    if store is not None and not callable(getattr(store, "bind", None)):
        raise ConfigError(
            f"store must be a Store such as InMemoryStore() or RedisStore(url), got "
            f"{type(store).__name__}"
        )
    if not isinstance(name, str) or not name or not name.isprintable() or " " in name:
        raise ConfigError(
            f"Router name must be a non-empty string without spaces, got {name!r}; it "
            "names the router's keys in a shared store"
        )
    if stream_failure not in ("raise", "restart"):
        raise ConfigError(f"stream_failure must be 'raise' or 'restart', got {stream_failure!r}")
    if stream_failure == "restart" and on_restart is None:
        raise ConfigError(
            "stream_failure='restart' needs on_restart=callback: a plain `for chunk` "
            "consumer would otherwise receive the failed route's partial text followed by "
            "the next route's whole answer; the callback is told to discard what it had"
        )


def check_policies_of(
    kwargs: Mapping[str, Any], endpoint: str, wait_by_default: bool
) -> tuple[Retry | None, bool, str | None]:
    """A call's own `retry=`, `wait_for_capacity=` and (for Responses) the
    `previous_response_id` it continues, each checked, naming the field and the fix (and
    its `hedge=`, which `hedge_of` reads)."""
    retry = kwargs.get("retry")
    if retry is not None and not isinstance(retry, Retry):
        raise ConfigError(f"retry must be a Retry, got {type(retry).__name__}")
    hedge = kwargs.get("hedge")
    if hedge is not None and not isinstance(hedge, Hedge):
        raise ConfigError(f"hedge must be a Hedge (or None for no hedge), got {type(hedge).__name__}")
    wait = kwargs.get("wait_for_capacity", wait_by_default)
    if not isinstance(wait, bool):
        raise ConfigError(f"wait_for_capacity must be True or False, got {wait!r}")
    previous = kwargs.get("previous_response_id") if endpoint == "responses" else None
    if previous is not None and (not isinstance(previous, str) or not previous.strip()):
        raise ConfigError(
            "previous_response_id must be the id of an earlier response (a non-empty "
            f"string, as response.id gave it), got {previous!r}"
        )
    return retry, wait, previous
