"""One SQLite file's connections, one a thread, and the transactions a store makes on them.

Each thread gets its own connection (WAL, `synchronous=NORMAL`: a commit survives the
process, a power cut may lose the last ones), opened on first use. A transaction is
`BEGIN IMMEDIATE` where it writes, so processes serialize on the file; one begun inside
another joins it, so an operation made of others (an admission) commits once. Every
`sqlite3` error comes out as `StoreUnavailableError`, the store protocol's one failure.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...ground.errors import StoreUnavailableError

if TYPE_CHECKING:
    import sqlite3

    from .unsettled import Unsettled

__all__ = ["Connections", "Transaction"]


class Connections:
    """The connections to `path`, one a thread; `sqlite3` is imported on first use, so
    `import policy_router` loads no driver a caller may not need."""

    def __init__(self, path: Path, timeout: float) -> None:
        import sqlite3

        self.path, self._timeout = path, timeout
        self.error: type[Exception] = sqlite3.Error
        self._local = threading.local()

    def connection(self) -> sqlite3.Connection:
        """This thread's connection, opened (and the file's folder made) when it has none."""
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            import sqlite3

            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db, self._local.depth = db, 0
        return db

    def transaction(self, write: bool = True, hook: Unsettled | None = None) -> Transaction:
        """One transaction on this thread's connection (see the module docstring); when it
        is the outermost, `hook` writes what waits for it first."""
        return Transaction(self, write, hook)

    def in_transaction(self) -> bool:
        """A transaction of this store is open on this thread (a new one would join it)."""
        return getattr(self._local, "depth", 0) > 0

    def close(self) -> None:
        """Close this thread's connection (others close with their threads)."""
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None


class Transaction:
    """A transaction as a context manager yielding the connection: committed when its
    block ends, rolled back when it raises. A class, not a `contextlib` generator: every
    store operation enters one, and a generator's context manager costs several times the
    frames of these two calls."""

    __slots__ = ("db", "hook", "outer", "taken", "to", "write")

    def __init__(self, to: Connections, write: bool, hook: Unsettled | None = None) -> None:
        self.to, self.write, self.hook = to, write, hook
        self.taken: list[Any] | None = None

    def __enter__(self) -> sqlite3.Connection:
        to = self.to
        try:
            db = self.db = to.connection()
            local = to._local
            self.outer = local.depth == 0
            if self.outer:
                db.execute("BEGIN IMMEDIATE" if self.write else "BEGIN")
        except to.error as error:
            raise StoreUnavailableError(f"SQLiteStore {to.path}: {error}") from error
        local.depth += 1
        if self.outer and self.hook is not None:
            self.taken = self.hook.take()
            try:
                self.hook.write(self.taken)
            except BaseException as error:
                # Rolled back, and what it took given back; a sqlite3 error said as the store's.
                self.__exit__(type(error), error, None)
                raise
        return db

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> None:
        to = self.to
        to._local.depth -= 1
        committed = False
        try:
            if self.outer:
                self.db.execute("COMMIT" if kind is None else "ROLLBACK")
                committed = kind is None
        except to.error as failed:
            # A COMMIT that failed (a full disk) leaves the transaction open, and every
            # later BEGIN on this connection would fail with it: end it here.
            if self.db.in_transaction:
                with contextlib.suppress(to.error):
                    self.db.execute("ROLLBACK")
            raise StoreUnavailableError(f"SQLiteStore {to.path}: {failed}") from failed
        finally:
            if self.taken and not committed and self.hook is not None:
                self.hook.lost(self.taken)  # what it wrote was rolled back: it waits again
        if isinstance(error, to.error):
            raise StoreUnavailableError(f"SQLiteStore {to.path}: {error}") from error
