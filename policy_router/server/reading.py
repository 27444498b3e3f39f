"""A request to the server, read: the endpoint's own arguments, checked against OpenAI's
definition of the path (the openai SDK's types, `drive.seam.openai_params`), and the
router's (`on_device`, `deadline`, `needs`) from the body's `policy_router` field or the
`x-policy-router-*` headers, never weaker than the key allows.

A name the SDK does not define for the path is refused with a 400 that names it: the server
never passes on what would move a request elsewhere (`api_base`, `api_key`, `base_url`, a
mock, LiteLLM's own retries) or what it does not know to be harmless. A value of the wrong
shape (`metadata` that is not an object, a message that is a number) is refused naming its
place, before anything is reserved or sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..config.keys import ApiKey
from ..drive.seam.openai_params import params
from ..ground.deadline import check_seconds
from ..ground.errors import ConfigError
from ..policies.requirements import Requirements

__all__ = ["ENDPOINT_FIELDS", "policy_headers", "policy_of", "read"]


class _Fields(Mapping[str, frozenset[str]]):
    """Each path's argument names, as the installed SDK defines them (read when asked)."""

    _ENDPOINTS = ("chat", "completion", "embedding", "responses")

    def __getitem__(self, endpoint: str) -> frozenset[str]:
        if endpoint not in self._ENDPOINTS:
            raise KeyError(endpoint)
        return params(endpoint).names

    def __iter__(self) -> Iterator[str]:
        return iter(self._ENDPOINTS)

    def __len__(self) -> int:
        return len(self._ENDPOINTS)


ENDPOINT_FIELDS: Mapping[str, frozenset[str]] = _Fields()
"""What OpenAI's API takes for each endpoint: the installed openai SDK's own parameters."""

_POLICY = frozenset({"on_device", "deadline", "needs"})


def read(
    endpoint: str,
    body: Any,
    headers: Mapping[str, str],
    key: ApiKey,
    most_deadline: float | None,
) -> dict[str, Any]:
    """The router's keyword arguments for this request (the endpoint's own, then
    `on_device`, `deadline`, `needs`); `ConfigError` naming the field that is wrong.
    Of `headers` only the `x-policy-router-*` ones are read (`policy_headers`).

    `on_device` is the key's floor or the request's, whichever holds; `deadline` the
    request's, no longer than `most_deadline` (the server's); `needs` only adds to what
    the request's own arguments need."""
    if not isinstance(body, dict):
        raise ConfigError("the request body must be a JSON object")
    defined = params(endpoint)
    kwargs: dict[str, Any] = {}
    for name, value in body.items():
        if name == "policy_router":
            continue
        if name not in defined.names:
            raise ConfigError(
                f"unrecognized request argument supplied: {name!r} (this server passes on "
                f"only OpenAI's arguments for {endpoint}; the router's go in 'policy_router')"
            )
        kwargs[name] = value
    if not isinstance(kwargs.get("model"), str) or not kwargs["model"]:
        raise ConfigError("'model' is required: the name of a group (GET /v1/models lists them)")
    # LiteLLM's `metadata.tags` (a list) beside OpenAI's string-valued metadata: read apart.
    metadata = kwargs.get("metadata")
    tags = metadata.get("tags") if isinstance(metadata, dict) else None
    if isinstance(metadata, dict) and isinstance(tags, list) and all(isinstance(t, str) for t in tags):
        problem = defined.problem({**kwargs, "metadata": {k: v for k, v in metadata.items() if k != "tags"}})
    else:
        problem = defined.problem(kwargs)
    if problem is not None:
        place, what = problem
        raise ConfigError(f"{place!r} is not valid: {what} (OpenAI's definition of {endpoint})")
    _scoped(kwargs, headers)
    return {**kwargs, **policy_of(body.get("policy_router"), headers, key, most_deadline)}


_PREFIX = b"x-policy-router-"


def policy_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """The `x-policy-router-*` headers of a request, all `read` looks at, from its ASGI
    scope's list: the first of a repeated one, as Starlette's `Headers.get` reads it.

    One pass over the list, rather than a search of it for each of the four names: a
    request seldom carries any."""
    found: dict[str, str] = {}
    for name, value in raw:
        if name.startswith(_PREFIX):
            found.setdefault(name.decode("latin-1"), value.decode("latin-1"))
    return found


def policy_of(
    asked: Any, headers: Mapping[str, str], key: ApiKey, most_deadline: float | None
) -> dict[str, Any]:
    """The router's own arguments of a request (`on_device`, `deadline`, `needs`), from
    its body's `policy_router` field or its `x-policy-router-*` headers, never weaker than
    the key allows: `ConfigError` naming a wrong one."""
    asked = {} if asked is None else asked
    if not isinstance(asked, dict) or not set(asked) <= _POLICY:
        shown = sorted(asked) if isinstance(asked, dict) else type(asked).__name__
        raise ConfigError(f"'policy_router' takes an object with {sorted(_POLICY)}, got {shown}")
    on_device = asked.get("on_device", _flag(headers.get("x-policy-router-on-device")))
    if not isinstance(on_device, bool):
        raise ConfigError(f"'policy_router.on_device' must be true or false, got {_shown(on_device)}")
    deadline = _deadline(asked.get("deadline", _seconds(headers.get("x-policy-router-deadline"))))
    if most_deadline is not None:
        deadline = most_deadline if deadline is None else min(deadline, most_deadline)
    found: dict[str, Any] = {"on_device": key.on_device or on_device}
    if deadline is not None:
        found["deadline"] = deadline
    if asked.get("needs") is not None:
        found["needs"] = _needs(asked["needs"])
    return found


def _scoped(kwargs: dict[str, Any], headers: Mapping[str, str]) -> None:
    """The end user and tags a request's budgets know it by: the body's `user` (OpenAI's
    own) or `x-policy-router-user`, and `metadata.tags` (LiteLLM's) plus
    `x-policy-router-tags: a,b`."""
    user = headers.get("x-policy-router-user")
    if user is not None:
        user = user.strip()
        if not user:
            raise ConfigError("x-policy-router-user is empty; send the end user's id, or leave the header out")
        if kwargs.get("user") not in (None, user):
            raise ConfigError("the body's 'user' and x-policy-router-user differ; send one of them")
        kwargs["user"] = user
    tags = headers.get("x-policy-router-tags")
    if tags is not None:
        named = [t.strip() for t in tags.split(",") if t.strip()]
        if not named:
            raise ConfigError("x-policy-router-tags names no tag; send them comma-separated: team:search,batch")
        metadata = kwargs.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise ConfigError("'metadata' must be an object to carry tags")
        had = metadata.get("tags") or []
        if not isinstance(had, list):
            raise ConfigError("'metadata.tags' must be a list of tags")
        kwargs["metadata"] = {**metadata, "tags": [*had, *(t for t in named if t not in had)]}


def _deadline(value: Any) -> float | None:
    """Seconds, a finite number > 0 (a number too large for a float is refused), or None."""
    try:
        return check_seconds(value, "'policy_router.deadline'")
    except ConfigError as error:
        raise ConfigError(str(error).replace(" (or None for no limit)", "")) from None


def _needs(value: Any) -> Requirements:
    """`needs` as a list of requirement names or an object of flags (`Requirements.of`)."""
    if isinstance(value, str | list | dict):
        try:
            return Requirements.of(value)
        except ConfigError as error:
            raise ConfigError(f"'policy_router.needs': {error}") from None
    raise ConfigError(
        "'policy_router.needs' must be a list of requirement names (['tools', 'images']) or "
        f"an object of flags ({{\"tools\": true}}), got {_shown(value)}"
    )


def _shown(value: Any) -> str:
    """A value as the error shows it: short, whatever the client sent."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}…"


def _flag(value: str | None) -> Any:
    if value is None:
        return False
    low = value.strip().lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    return value  # refused above, named


def _seconds(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return value  # refused above, named
