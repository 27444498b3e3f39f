"""Which exchange answers which path."""

from __future__ import annotations

from .chat import ChatExchange
from .completions import CompletionExchange
from .embeddings import EmbeddingExchange
from .responses import ResponsesExchange
from .server import Exchange

__all__ = ["EXCHANGES"]

# Longest path first: "/chat/completions" must not be taken for "/completions".
EXCHANGES: dict[str, type[Exchange]] = {
    "/chat/completions": ChatExchange,
    "/completions": CompletionExchange,
    "/embeddings": EmbeddingExchange,
    "/responses": ResponsesExchange,
}
