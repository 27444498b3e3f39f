"""Embeddings (`/embeddings`): one vector per input, billed by its input tokens."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from .billing import words
from .exchange import Exchange, reported
from .steps import Reply

__all__ = ["EmbeddingExchange"]

DIMENSIONS = 8


def vector(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """A deterministic unit-ish vector for `text`: equal texts embed equally."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return [round((b - 127.5) / 127.5, 6) for b in digest[:dimensions]]


class EmbeddingExchange(Exchange):
    """An OpenAI embeddings answer; a stream is not a thing here, so `stream` is ignored."""

    prefix = "emb-fake"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stream = False

    def _inputs(self) -> list[str]:
        raw = self.body.get("input")
        items = raw if isinstance(raw, list) else [raw]
        if items and all(isinstance(i, int) for i in items):
            items = [items]  # one input given as token ids
        return [" ".join(map(str, i)) if isinstance(i, list) else str(i) for i in items]

    def billed(self, reply: Reply) -> int:
        return reply.usage[0] if reply.usage else max(sum(words(t) for t in self._inputs()), 1)

    def answer(self, reply: Reply) -> dict[str, Any]:
        inputs = self._inputs()
        dimensions = self.body.get("dimensions") or DIMENSIONS
        tokens = self.billed(reply)
        return reported({
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": vector(text, int(dimensions))}
                for i, text in enumerate(inputs)
            ],
            "model": self.model,
            "created": int(time.time()),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }, reply)
