"""Settlements a `SQLiteStore` writes with its next transaction (`settle_within=`).

A budgeted call costs the store two write transactions: the reservation before sending and
the settlement after the answer. Each `BEGIN IMMEDIATE ... COMMIT` takes and drops the
file's locks and appends its pages to the WAL, which is most of what the SQL costs a call.
The reservation must be written before anything is sent; the settlement may wait: until
it is written the call's hold stays held, so every process reads the account as spending
at least what it has spent (the safe side, never past a cap). So a store given
`settle_within` keeps a settlement made in an event loop and writes it in the next
transaction this process opens (usually the next call's reservation: one transaction a
call), or after `settle_within` seconds on that loop, whichever comes first.

What it does not change: every read of this store writes what waits first, so this
process never reads a settled call as held; `close()` and the interpreter's exit write
what waits. Another process reads the hold for at most `settle_within` seconds more. A
process killed in that window leaves the hold to its lease, charged at its worst case, as
for a call cut mid-flight. A settlement made outside an event loop is written at once.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import weakref
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from loguru import logger

from ...ground.errors import StoreUnavailableError
from ..admission import conclude_in_turn

if TYPE_CHECKING:
    from ..admission import Settlement
    from ..store import Store

__all__ = ["Unsettled"]

# Every queue with settlements waiting, written at the interpreter's exit (a loop's timer
# dies with its loop, so a script that ends right after its call would leave them held).
_LIVE: weakref.WeakSet[Unsettled] = weakref.WeakSet()


class Unsettled:
    """The settlements waiting to be written, shared by a store and its router views (each
    kept with the view that made it, whose clock its health change is written on). The
    transaction that takes them is handed the queue as its hook (`take`, `write`, `lost`)."""

    __slots__ = ("__weakref__", "_flush", "_loop", "_timer", "items", "within")

    def __init__(self, within: float) -> None:
        self.within = within
        self.items: deque[tuple[Store, Settlement]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flush: Callable[[], None] = lambda: None

    def defer(self, store: Store, done: Settlement, flush: Callable[[], None]) -> bool:
        """Queue `done` (made through `store`) to be written later, by the next transaction
        or by `flush` (a transaction of its own) when it is due: False when it must be
        written now (no `settle_within`, or no event loop running in this thread)."""
        if not self.within:
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        self.items.append((store, done))
        self._flush = flush
        _LIVE.add(self)
        if self._timer is None or self._loop is not loop:
            self._loop, self._timer = loop, loop.call_later(self.within, self._due)
        return True

    def _due(self) -> None:
        self._timer = None
        if self.items:
            try:
                self._flush()
            except StoreUnavailableError as error:
                # Kept: the next transaction, or the exit, writes them; held until then.
                logger.warning("policy_router: settlements wait for the store: {}", error)

    def take(self) -> list[tuple[Store, Settlement]]:
        """Every settlement waiting, taken off the queue for the transaction just begun,
        which writes them (`write`) and gives them back (`lost`) if it rolls back."""
        taken: list[tuple[Store, Settlement]] = []
        with contextlib.suppress(IndexError):
            while True:
                taken.append(self.items.popleft())
        return taken

    @staticmethod
    def write(taken: list[tuple[Store, Settlement]]) -> None:
        """Write `taken` in the transaction open on this thread (each store joins it)."""
        for store, done in taken:
            conclude_in_turn(store, done)

    def lost(self, taken: list[tuple[Store, Settlement]]) -> None:
        """The transaction that wrote `taken` rolled back: they wait again, first."""
        self.items.extendleft(reversed(taken))


@atexit.register
def _write_all_at_exit() -> None:
    for queue in list(_LIVE):
        if queue.items:
            try:
                queue._flush()
            except StoreUnavailableError as error:
                logger.warning("policy_router: settlements left held at exit: {}", error)
