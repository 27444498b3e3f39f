"""Recording attempts in a metrics store off the request path.

The `Recorder` is an observer: each attempt the router records becomes a `MetricRow` in a
bounded buffer, and one background thread writes the buffer in batches. A call never waits
on the store and never fails by it. When the store cannot be written the rows stay in the
buffer (nothing is lost while it has room; what it must drop, oldest first, is counted),
one warning says so, and one line says when the store answers again.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping

from loguru import logger

from ...core.journey import Attempt
from ...ground.records import Check, Skip
from .base import MetricsStore
from .schema import MetricRow

__all__ = ["Recorder", "row_of"]

_OUTCOME = {
    "answered": "success", "rate_limited": "rate_limited", "timeout": "timeout", "closed": "closed",
}


def row_of(record: object, scope: str, models: Mapping[str, str], at: float) -> MetricRow | None:
    """The metrics row for an attempt (or a route the request could not leave for), or
    None for what says nothing about a route: a cancelled call, LiteLLM's own answer."""
    if isinstance(record, Skip):
        if record.check is not Check.SEND:
            return None
        rid = record.route_id or record.route
        return MetricRow(recorded_at=at, scope=scope, route_id=rid, model=models.get(rid, ""), endpoint="", streaming=False, outcome="not_sent", journey_id=record.journey_id)
    if not isinstance(record, Attempt) or record.outcome == "cancelled" or not record.sent:
        return None
    rid = record.route_id or record.route
    usage, cost = record.usage, record.cost
    return MetricRow(
        recorded_at=at,
        scope=scope,
        route_id=rid,
        model=models.get(rid, ""),
        endpoint=record.endpoint,
        streaming=record.streamed,
        outcome=_OUTCOME.get(record.outcome, "error"),
        latency=record.elapsed if record.ok else None,
        duration=record.duration,
        tokens_in=usage.prompt if usage else None,
        tokens_out=usage.completion if usage else None,
        cost_micros=cost.micros if cost else None,
        currency=cost.currency if cost else None,
        journey_id=record.journey_id,
    )


class Recorder:
    """An observer writing a router's attempts to `store` under `scope` (see the module
    docstring). `models` maps route ids to their model strings; `buffer` rows at most wait
    for the store; a failed write is tried again every `retry_every` seconds."""

    def __init__(
        self,
        store: MetricsStore,
        scope: str,
        models: Mapping[str, str],
        *,
        buffer: int = 10_000,
        batch: int = 500,
        retry_every: float = 1.0,
    ) -> None:
        self.store = store
        self.scope = scope
        self.models = dict(models)
        self._rows: deque[MetricRow] = deque()
        self._size = buffer
        self._batch = batch
        self._retry = retry_every
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._busy = 0  # rows taken from the buffer and not yet written
        self._failing = False
        self._stopped = False
        self.dropped = 0
        """Rows dropped because the buffer was full while the store could not be written."""
        self.written = 0

    def __call__(self, record: object) -> None:
        if not isinstance(record, Attempt | Skip):
            return
        row = row_of(record, self.scope, self.models, time.time())
        if row is None:
            return
        with self._wake:
            if len(self._rows) >= self._size:
                self._rows.popleft()
                self.dropped += 1
            self._rows.append(row)
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(target=self._loop, name="policy_router-metrics", daemon=True)
                self._thread.start()
            self._wake.notify()

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._rows and not self._stopped:
                    self._wake.wait()
                if not self._rows and self._stopped:
                    return
                rows = [self._rows.popleft() for _ in range(min(self._batch, len(self._rows)))]
                self._busy = len(rows)
            try:
                self.store.write(rows)
            except Exception as error:
                with self._wake:
                    self._rows.extendleft(reversed(rows))  # kept, in order, for the next try
                    while len(self._rows) > self._size:
                        self._rows.pop()
                        self.dropped += 1
                    self._busy = 0
                    self._wake.notify_all()
                if not self._failing:
                    self._failing = True
                    logger.warning(
                        "policy_router: the metrics store {} cannot be written ({}); calls go on, "
                        "and rows wait in memory (up to {}) until it answers",
                        self.store.target, error, self._size,
                    )
                time.sleep(self._retry)
                continue
            with self._wake:
                self._busy = 0
                self.written += len(rows)
                self._wake.notify_all()
            if self._failing:
                self._failing = False
                logger.warning(
                    "policy_router: the metrics store {} answers again ({} rows dropped meanwhile)",
                    self.store.target, self.dropped,
                )

    @property
    def pending(self) -> int:
        """Rows waiting to be written."""
        with self._wake:
            return len(self._rows) + self._busy

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every row recorded so far is written (True), or `timeout` passes, or
        the store is found failing (False: the rows stay buffered)."""
        deadline = time.monotonic() + timeout
        with self._wake:
            while self._rows or self._busy:
                if self._failing and not self._busy:
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._wake.wait(left)
        return True

    def stop(self, timeout: float = 5.0) -> bool:
        """Write what is buffered (for up to `timeout`), then stop the thread."""
        done = self.flush(timeout)
        with self._wake:
            self._stopped = True
            self._wake.notify_all()
        return done
