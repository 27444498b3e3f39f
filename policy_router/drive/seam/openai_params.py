"""OpenAI's own definition of each request body, read from the openai SDK's types (and
Anthropic's, for the Messages API, from the anthropic SDK's).

The server reads a body against these, not against a list written here: every argument
the installed SDK defines for a path is accepted (a new SDK's new argument included, once
the SDK is bumped), every other name is refused, and every value is checked against the
SDK's type for it, nested parts included, so a malformed request is a 400 naming its place
before anything is reserved or sent.

The SDK's `TypedDict`s are made for type checkers: their sequences are `Iterable[...]`,
which pydantic validates lazily (only when read). Each type is rebuilt once with lists in
their place, so one `validate_python` call checks the whole body, in pydantic-core.
Extra keys inside a part (a provider's `cache_control`, say) are left as they are: the SDK
types say what a part must hold, not what it may not.
"""

from __future__ import annotations

import collections.abc as cabc
import types
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any

import typing_extensions as te
from pydantic import TypeAdapter, ValidationError

__all__ = ["Params", "params"]


@dataclass(frozen=True, slots=True)
class Params:
    """One path's body as the SDK defines it: the argument names it takes, and a check of
    a body's values (`problem`)."""

    names: frozenset[str]
    adapter: TypeAdapter[Any]

    def problem(self, body: dict[str, Any]) -> tuple[str, str] | None:
        """None when every value is of the SDK's type; else the place of the first that is
        not (`messages[0].content`) and what is wrong with it."""
        try:
            self.adapter.validate_python(body, strict=True)
        except ValidationError as error:
            return _worst(error)
        return None


def _worst(error: ValidationError) -> tuple[str, str]:
    """The most telling of a validation's errors. A union reports one error per member; a
    member whose tag did not match (its `type` or `role` is another literal) is not the
    one the caller meant, and of the rest the error that got deepest into the value is."""
    found = error.errors(include_url=False)
    ruled_out = {
        _member(e["loc"]) for e in found
        if e["type"] == "literal_error" and e["loc"] and e["loc"][-1] in ("type", "role")
    }
    kept = [e for e in found if _member(e["loc"]) not in ruled_out]
    if not kept and ruled_out:  # no member's tag matched: say every one it could be
        tags = [e for e in found if e["type"] == "literal_error" and e["loc"][-1] in ("type", "role")]
        expected = ", ".join(dict.fromkeys(str(e.get("ctx", {}).get("expected", "")) for e in tags))
        return _place(tags[0]["loc"]), f"Input should be {expected}"
    kept = kept or found
    best = max(kept, key=lambda e: len(_place(e["loc"]).replace("[", ".[").split(".")))
    return _place(best["loc"]), str(best["msg"])


def _member(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """The union member an error's location is inside: its path up to the last member name."""
    last = max((i for i, part in enumerate(loc) if part in _TAGS), default=-1)
    return loc[: last + 1]


def _place(loc: tuple[int | str, ...]) -> str:
    """A pydantic location as a JSON path, without the union members' own names."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part in _TAGS or part.startswith(("literal[", "list[", "dict[")) or part in ("str", "int", "float", "bool", "none"):
            continue  # which member of a union pydantic tried, not a key of the body
        else:
            text += f".{part}" if text else part
    return text


_TAGS: set[str] = set()


@cache
def params(endpoint: str) -> Params:
    """The SDK's definition of `endpoint`'s body ("chat", "embedding", "responses",
    "completion"; Anthropic's "messages" and "count_tokens"), built the first time it is
    asked for (about 0.1 s for Responses)."""
    if endpoint in ("messages", "count_tokens"):
        base = _anthropic(endpoint)
    else:
        from openai.types import completion_create_params, embedding_create_params
        from openai.types.chat import completion_create_params as chat_params
        from openai.types.responses import response_create_params

        base = {
            "chat": chat_params.CompletionCreateParamsBase,
            "embedding": embedding_create_params.EmbeddingCreateParams,
            "responses": response_create_params.ResponseCreateParamsBase,
            "completion": completion_create_params.CompletionCreateParamsBase,
        }[endpoint]
    hints = typing.get_type_hints(base, include_extras=True)
    fields = {name: _listed(hint) for name, hint in hints.items()}
    if endpoint not in ("embedding", "count_tokens"):
        fields["stream"] = te.NotRequired[bool | None]  # the SDK splits the type on it
    if endpoint == "messages":
        # Sampling settings the Messages API takes and clients (Claude Code among them)
        # still send, which the installed SDK's types no longer list.
        fields |= {"temperature": te.NotRequired[float | None], "top_p": te.NotRequired[float | None],
                   "top_k": te.NotRequired[int | None]}
    body: Any = _typed_dict(base.__name__, fields)
    return Params(frozenset(fields), TypeAdapter(body))


def _anthropic(endpoint: str) -> Any:
    """The anthropic SDK's definition of a Messages body (the server extra installs it)."""
    from anthropic.types import message_count_tokens_params, message_create_params

    if endpoint == "messages":
        return message_create_params.MessageCreateParamsBase
    return message_count_tokens_params.MessageCountTokensParams


_BUILT: dict[Any, Any] = {}


def _listed(hint: Any) -> Any:
    """`hint` with every `Iterable`/`Sequence` a list and every TypedDict rebuilt so, the
    required keys kept required."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if te.is_typeddict(hint):
        built = _BUILT.get(hint)
        if built is None:
            _TAGS.add(hint.__name__)
            inner = typing.get_type_hints(hint, include_extras=True)
            # Python 3.11's TypedDict forgets `Required[...]` in `__required_keys__` when
            # the class says total=False: the annotation itself is read.
            fields = {
                k: (te.Required if _required(hint, k, v) else te.NotRequired)[_listed(_bare(v))]
                for k, v in inner.items()
            }
            built = _BUILT[hint] = _typed_dict(hint.__name__, fields)
        return built
    if origin in (cabc.Iterable, cabc.Sequence, list):
        return list[_listed(args[0])] if args else list  # type: ignore[misc]
    if origin in (te.Required, te.NotRequired, typing.Required, typing.NotRequired):
        return origin[_listed(args[0])]
    if origin in (te.Annotated, typing.Annotated):
        return _listed(args[0])
    if origin in (typing.Union, types.UnionType):
        return typing.Union[tuple(_listed(a) for a in args)]  # noqa: UP007 (built at run time)
    if origin in (dict, cabc.Mapping) and args:
        return dict[_listed(args[0]), _listed(args[1])]  # type: ignore[misc]
    if origin is typing.IO or origin is tuple or (isinstance(hint, type) and hint not in _JSON):
        return Any  # a file, a path, bytes: what a JSON body cannot carry is not checked here
    return hint


_JSON = (str, int, float, bool, type(None), dict, list)


def _typed_dict(name: str, fields: dict[str, Any]) -> Any:
    """A TypedDict made at run time (whose keys say themselves which are required)."""
    make: Any = te.TypedDict
    return make(name, fields, total=False)


def _required(typed: Any, key: str, hint: Any) -> bool:
    if typing.get_origin(hint) in (te.Required, typing.Required):
        return True
    if typing.get_origin(hint) in (te.NotRequired, typing.NotRequired):
        return False
    return key in typed.__required_keys__


def _bare(hint: Any) -> Any:
    """A TypedDict field's type without its Required/NotRequired/Annotated wrappers."""
    while typing.get_origin(hint) in (te.Required, te.NotRequired, typing.Required, typing.NotRequired, te.Annotated, typing.Annotated):
        hint = typing.get_args(hint)[0]
    return hint
