"""The one scrubber between the router and the world: every secret it was given, taken out
of every text it emits or re-raises.

A route's secrets are found safe by default: the value of every keyword whose name says key,
token, secret, password, authorization or credential (headers included), the password of a
URL's userinfo (`http://user:PASSWORD@host`), the value of every URL query parameter whose
name says the same (`?api-key=KEY`, `?sig=...`), and any value the route was told is secret
(one read from an `os.environ/` reference). A provider that echoes a key in its error text,
its headers or a URL cannot put it into an exception the router raises: `scrub_exception`
rewrites the message, the args, the notes and every exception in the chain, keeping each
one's class and status, so `except litellm.AuthenticationError` still works.

One request knows more than its routes: the secrets its call carries (`extra_headers`, a
credential keyword), the ones LiteLLM found for it and put on the wire (read from the
environment: `OPENAI_API_KEY` becomes an `Authorization` header; `wire_secrets` reads them
from LiteLLM's pre-call log), and every secret-named variable of the process environment
(`environment_secrets`). A request's `Scrubber` holds all of them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

__all__ = [
    "MASK",
    "Scrubber",
    "environment_secrets",
    "is_secret_name",
    "redact",
    "scrub_exception",
    "scrubbed",
    "secrets_in",
    "wire_secrets",
]

MASK = "***"
_SECRET_WORDS = (
    "key", "token", "secret", "password", "passwd", "authorization", "credential", "sig",
    "auth",
)
_URL_KEYS = ("api_base", "base_url", "url", "endpoint")
_SHORTEST = 4  # shorter values would mask ordinary words


def is_secret_name(name: str) -> bool:
    """True for a keyword, header or query parameter whose name says it holds a secret."""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def _in_url(url: str) -> list[str]:
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
    except ValueError:
        return []
    found = [parts.password] if parts.password else []
    if parts.username and parts.password is None and "@" in parts.netloc:
        found.append(parts.username)  # a token given as the user part alone
    found.extend(v for k, v in parse_qsl(parts.query) if is_secret_name(k) and v)
    return found


def secrets_in(kwargs: Mapping[str, Any], extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The secret values among a route's kwargs (see the module docstring), longest first."""
    found: list[str] = [s for s in extra if isinstance(s, str)]
    for name, value in kwargs.items():
        if isinstance(value, Mapping):
            found.extend(str(v) for k, v in value.items() if is_secret_name(str(k)) and v)
        elif is_secret_name(name) and isinstance(value, str) and value:
            found.append(value)
        if isinstance(value, str) and (name in _URL_KEYS or "://" in value):
            found.extend(_in_url(value))
    # A bearer header holds the key after "Bearer ": redact the bare key too.
    found.extend(s.split(" ", 1)[1] for s in list(found) if s.lower().startswith("bearer "))
    return tuple(sorted({s for s in found if len(s) >= _SHORTEST}, key=len, reverse=True))


# Environment values that a secret-looking name holds but that are no secret: masking them
# would mask ordinary words in every message (`TOKENIZERS_PARALLELISM=false`).
_PLAIN_VALUES = frozenset({"true", "false", "yes", "no", "on", "off", "none", "null"})
_ENV_SHORTEST = 8


def environment_secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The secret values of the process environment (or `environ`), longest first: every
    variable whose name says it holds a secret (`OPENAI_API_KEY`, `AWS_SECRET_ACCESS_KEY`,
    `ANTHROPIC_AUTH_TOKEN`, ...), and the password of any URL a variable holds
    (`REDIS_URL=redis://:PASSWORD@host`).

    Whatever provider LiteLLM reads its key for, the key is among these: the name test is
    an allow-list of the harmless turned around (every name that could hold a secret
    counts). Values that cannot be a key are left out so ordinary words stay readable:
    shorter than 8 characters, a flag (`true`, `off`), a number, or a file path.
    """
    env = os.environ if environ is None else environ
    found: set[str] = set()
    for name, value in list(env.items()):
        if not isinstance(value, str) or len(value) < _ENV_SHORTEST:
            continue
        if "://" in value:
            found.update(v for v in _in_url(value) if len(v) >= _SHORTEST)
        if (
            is_secret_name(name)
            and value.lower() not in _PLAIN_VALUES
            and not value.isdigit()
            and not value.startswith(("/", "~", "./", "../"))
        ):
            found.add(value)
    return tuple(sorted(found, key=len, reverse=True))


def wire_secrets(details: Mapping[str, Any]) -> tuple[str, ...]:
    """The secrets a request carried on the wire, read from LiteLLM's pre-call log (the
    `logger_fn` details): the key it used (`api_key`, wherever LiteLLM found it), every
    header whose name says secret (`Authorization`, `x-api-key`, `api-key`,
    `x-goog-api-key`), and the password or secret query parameters of the URL."""
    found: list[str] = []
    key = details.get("api_key")
    if isinstance(key, str):
        found.append(key)
    extra = details.get("additional_args")
    if isinstance(extra, Mapping):
        headers = extra.get("headers")
        if isinstance(headers, Mapping):
            found.extend(str(v) for k, v in headers.items() if is_secret_name(str(k)) and v)
        base = extra.get("api_base")
        if base is not None:
            found.extend(_in_url(str(base)))
    found.extend(s.split(" ", 1)[1] for s in list(found) if s.lower().startswith("bearer "))
    # LiteLLM's placeholders for servers that need no key are no secret.
    return tuple(s for s in found if len(s) >= _SHORTEST and s not in _PLACEHOLDERS)


_PLACEHOLDERS = frozenset({"fake-api-key", "mock-key", "sk-fake", "None"})


class Scrubber:
    """Every secret one request knows of, and the two ways out of them: `redact` a text,
    `scrub` an exception in place.

    It starts with the secrets of the request's routes (`given`) and those its call's own
    keywords carry (`call`: a key in its `extra_headers`, a credential keyword, read only
    when the scrubber is used), learns those each attempt put on the wire (`learn`), and
    adds the process environment's secrets (`environment_secrets`) whenever it is used,
    since the environment can change while a router runs. It is asked only on the way out
    of a failure, never per answer, so an answered call pays for none of this.
    """

    __slots__ = ("_call", "_given", "_learned")

    def __init__(self, given: Iterable[str] = (), call: Mapping[str, Any] | None = None) -> None:
        self._given = tuple(given)
        self._call = call
        self._learned: tuple[str, ...] = ()

    def learn(self, secrets: Iterable[str]) -> None:
        """Add secrets found later (an attempt's wire)."""
        new = tuple(s for s in secrets if s not in self._learned and s not in self._given)
        if new:
            self._learned = (*self._learned, *new)

    @property
    def secrets(self) -> tuple[str, ...]:
        """All the secrets known now, longest first (so a key inside a header goes whole)."""
        own = secrets_in(self._call) if self._call else ()
        everything = {*self._given, *own, *self._learned, *environment_secrets()}
        return tuple(sorted((s for s in everything if len(s) >= _SHORTEST), key=len, reverse=True))

    def redact(self, text: str) -> str:
        """`text` with every known secret replaced by `***`."""
        return redact(text, self.secrets) if text else text

    def scrub(self, error: BaseException) -> BaseException:
        """`error` and all it holds, scrubbed in place (see `scrub_exception`)."""
        return scrub_exception(error, self.secrets)


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """`text` with every secret in `secrets` (longest first) replaced by `***`."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def scrubbed(
    value: Any,
    secrets: tuple[str, ...],
    *,
    drop_named: bool = False,
    depth: int | None = 4,
) -> Any:
    """`value` with every secret in `secrets` masked in its strings, through mappings,
    lists and tuples `depth` levels deep (None: all the way). With `drop_named`, a mapping
    entry whose key names a secret (`api_key`, an `Authorization` header) is left out."""
    if isinstance(value, str):
        return redact(value, secrets)
    if depth is not None and depth < 0:
        return value
    deeper = None if depth is None else depth - 1
    if isinstance(value, Mapping):
        return {
            k: scrubbed(v, secrets, drop_named=drop_named, depth=deeper)
            for k, v in value.items()
            if not (drop_named and is_secret_name(str(k)))
        }
    if isinstance(value, list | tuple):
        return type(value)(scrubbed(v, secrets, drop_named=drop_named, depth=deeper) for v in value)
    return value


def _scrub_http(obj: Any, secrets: tuple[str, ...]) -> None:
    # An httpx response keeps the request it answered, Authorization header and URL in it.
    for holder in (obj, getattr(obj, "request", None)):
        if holder is None:
            continue
        url = getattr(holder, "url", None)
        if url is not None and any(s in str(url) for s in secrets):
            with contextlib.suppress(AttributeError, TypeError, ValueError):
                holder.url = type(url)(redact(str(url), secrets))
        headers: Any = getattr(holder, "headers", None)
        if headers is None:
            continue
        try:
            for name in list(headers.keys()):
                value = headers[name]
                if is_secret_name(name) or any(s in value for s in secrets):
                    headers[name] = MASK
        except (TypeError, AttributeError, KeyError, RuntimeError):
            pass


def scrub_exception(exc: BaseException, secrets: tuple[str, ...]) -> BaseException:
    """Take `secrets` out of `exc` and of every exception it holds, in place: message,
    args, notes, string attributes (LiteLLM's `message`, the SDK's `body`), and the headers
    of an attached HTTP request or response. Class, status and traceback are kept.

    "Holds" is the chain (`__cause__`, `__context__`) and every attribute that is an
    exception: LiteLLM's `MidStreamFallbackError` prints its `original_exception` in its
    own text, which no chain links to."""
    if not secrets:
        return exc
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 16:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        with contextlib.suppress(TypeError, AttributeError):
            current.args = tuple(scrubbed(a, secrets) for a in current.args)
        notes = getattr(current, "__notes__", None)
        if isinstance(notes, list):
            notes[:] = [redact(n, secrets) if isinstance(n, str) else n for n in notes]
        for name, value in list(vars(current).items()) if hasattr(current, "__dict__") else ():
            if name.startswith("__"):
                continue
            if isinstance(value, BaseException):
                todo.append(value)
            elif isinstance(value, str | Mapping | list | tuple):
                with contextlib.suppress(AttributeError, TypeError):
                    setattr(current, name, scrubbed(value, secrets))
            elif name in ("response", "request"):
                _scrub_http(value, secrets)
        todo += [e for e in (current.__context__, current.__cause__) if e is not None]
    return exc
