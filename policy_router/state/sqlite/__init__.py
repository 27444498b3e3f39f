"""The store in a SQLite file (`SQLiteStore`): durable, shared by the processes of one
machine; the standard library's `sqlite3`, no extra to install."""

from .store import SQLiteStore

__all__ = ["SQLiteStore"]
