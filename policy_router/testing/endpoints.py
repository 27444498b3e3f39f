"""Which exchange answers which path."""

from __future__ import annotations

from .chat import ChatExchange
from .completions import CompletionExchange
from .embeddings import EmbeddingExchange
from .exchange import Exchange
from .responses import ResponsesExchange

__all__ = ["EXCHANGES"]

# Longest path first: "/chat/completions" must not be taken for "/completions".
EXCHANGES: dict[str, type[Exchange]] = {
    "/chat/completions": ChatExchange,
    "/completions": CompletionExchange,
    "/embeddings": EmbeddingExchange,
    "/responses": ResponsesExchange,
}
