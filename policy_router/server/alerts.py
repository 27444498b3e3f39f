"""The server's budget alerts: each `BudgetThreshold` POSTed as JSON to
`server.alerts.webhook`, in the background.

An observer of the router: it queues the event and returns, so no request ever waits on
the webhook; a thread of its own POSTs each one, trying up to `ATTEMPTS` times with a
growing pause, then drops it with a warning. The body names the scope (a key by its name, a
user by the id the caller gave), the threshold, what was spent of what cap, and when the
period resets: never a key, never a prompt. Thresholds are told once per scope and period
across every process sharing the store (`Budget.warn_at`), so one alert reaches the hook.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import urllib.request
from typing import Any

from loguru import logger

from ..policies.accounts import BudgetThreshold
from .answers import amount

__all__ = ["ATTEMPTS", "Webhook", "payload"]

ATTEMPTS = 3
"""How many times one alert is POSTed before it is dropped (with a warning)."""

_QUEUED = 1000  # alerts waiting at most; past it the oldest is dropped


def payload(event: BudgetThreshold) -> dict[str, Any]:
    """An alert's JSON body."""
    return {
        "type": "budget.threshold",
        "scope": event.scope,
        "fraction": event.fraction,
        "spent": amount(event.spent),
        "cap": amount(event.cap),
        "currency": event.cap.currency,
        "period": event.period,
        "resets_at": None if event.resets_at is None else event.resets_at.isoformat(),
    }


class Webhook:
    """An observer POSTing each `BudgetThreshold` to `url` (see the module docstring)."""

    def __init__(self, url: str, *, timeout: float = 5.0, pause: float = 0.5) -> None:
        self.url = url
        self._timeout = timeout
        self._pause = pause
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=_QUEUED)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.sent = 0
        self.dropped = 0

    def __call__(self, record: object) -> None:
        if not isinstance(record, BudgetThreshold):
            return
        body = payload(record)
        try:
            self._queue.put_nowait(body)
        except queue.Full:  # the hook is down and alerts pile up: the oldest goes
            self.dropped += 1
            try:
                self._queue.get_nowait()
                self._queue.put_nowait(body)
            except (queue.Empty, queue.Full):
                pass
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._send_all, name="policy_router-webhook", daemon=True)
                self._thread.start()

    def _send_all(self) -> None:
        while (body := self._queue.get()) is not None:
            for attempt in range(ATTEMPTS):
                try:
                    self._post(body)
                    self.sent += 1
                    break
                except Exception as error:  # every failure of the hook is the hook's
                    if attempt == ATTEMPTS - 1:
                        self.dropped += 1
                        logger.warning(
                            "policy_router: the budget alert for {} could not be sent to the webhook after {} tries: {}",
                            body["scope"], ATTEMPTS, type(error).__name__,
                        )
                    else:
                        time.sleep(self._pause * 2**attempt)

    def _post(self, body: dict[str, Any]) -> None:
        request = urllib.request.Request(
            self.url, data=json.dumps(body).encode(), method="POST",
            headers={"content-type": "application/json", "user-agent": "policy-router"},
        )
        with urllib.request.urlopen(request, timeout=self._timeout) as answer:
            answer.read()

    def close(self) -> None:
        """Let the sender finish what is queued (it ends with the process otherwise)."""
        with self._lock:
            if self._thread is not None:
                self._queue.put(None)
