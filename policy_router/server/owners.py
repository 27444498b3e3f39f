"""Which tenant each stored object belongs to: a Responses answer (whole, streamed or run in
the background) and the conversation it was part of.

The server keeps them for every key alike (the provider stores them under the server's own
provider key), so without this a `previous_response_id` made under key A would be continued
by key B, and the provider would hand B A's conversation. Each id the server hands a client
is recorded with its key, in the router's store (so every server process on one store
knows it, for as long as the provider keeps the response, `continuity.KEEP_SECONDS`), and a
request that names an id its key does not own gets OpenAI's 404 for an unknown id, with
nothing sent. An id the server never handed out (made elsewhere, or forgotten) is unknown
to every key alike: refused, never guessed at.

The record is the store's own record of a response (`remember_response`), under a prefix
of its own, with the key's name where a route's id would be.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..policies.continuity import KEEP_SECONDS

__all__ = ["Owners", "named_ids", "owned_ids", "unknown_words"]

_PREFIX = "owner:"


class Owners:
    """The tenant of each response and conversation id the server handed out."""

    def __init__(self, store: Any) -> None:
        self._store = store

    async def remember(self, ids: Iterable[str], key: str) -> None:
        """Record that `key` owns each of `ids` (before the client can read any of them)."""
        for found in ids:
            await self._call("remember_response", _PREFIX + found, key, False, KEEP_SECONDS)

    async def owner(self, found: str) -> str | None:
        """The key that owns `found`, or None when the server never handed it out."""
        record = await self._call("recall_response", _PREFIX + found)
        return None if record is None else str(record[0])

    async def _call(self, method: str, *args: Any) -> Any:
        if getattr(self._store, "remote", False):
            return await getattr(self._store, "a" + method)(*args)
        return getattr(self._store, method)(*args)


def owned_ids(answer: Any) -> list[str]:
    """The ids in a Responses answer or event that a later request may name: the
    response's own, and its conversation's."""
    found: list[str] = []
    response = getattr(answer, "response", None) or answer  # an event carries its response
    ident = getattr(response, "id", None)
    if isinstance(ident, str) and ident:
        found.append(ident)
    conversation = getattr(response, "conversation", None)
    conv_id = getattr(conversation, "id", None) if conversation is not None else None
    if conv_id is None and isinstance(conversation, dict):
        conv_id = conversation.get("id")
    if isinstance(conv_id, str) and conv_id:
        found.append(conv_id)
    return found


def named_ids(kwargs: dict[str, Any]) -> list[tuple[str, str]]:
    """The stored objects a Responses request names: (argument, id) for its
    `previous_response_id` and its `conversation`."""
    named: list[tuple[str, str]] = []
    previous = kwargs.get("previous_response_id")
    if isinstance(previous, str) and previous:
        named.append(("previous_response_id", previous))
    conversation = kwargs.get("conversation")
    if isinstance(conversation, dict):
        conversation = conversation.get("id")
    if isinstance(conversation, str) and conversation:
        named.append(("conversation", conversation))
    return named


def unknown_words(argument: str, named: str) -> tuple[str, str]:
    """OpenAI's words and code for a stored object the key does not own (or nobody does)."""
    if argument == "conversation":
        return f"Conversation with id '{named}' not found.", "conversation_not_found"
    return f"Previous response with id '{named}' not found.", "previous_response_not_found"
