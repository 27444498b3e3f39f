"""Which exchange answers which path."""

from __future__ import annotations

from .chat import ChatExchange
from .server import Exchange

__all__ = ["EXCHANGES"]

EXCHANGES: dict[str, type[Exchange]] = {
    "/chat/completions": ChatExchange,
}
