"""Observation: every decision goes to observers as a frozen record.

The records are the journey's own `Skip` and `Attempt`, plus the breaker's `RestOpened`
and `RestClosed`. An observer is any callable taking one record; it must not raise (an
observer that does is reported once and otherwise ignored: observing never fails a call).
The default, `LogObserver`, writes loguru lines under the `policy_router` name, which the
package disables on import: `logger.enable("policy_router")` turns them on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from loguru import logger

from .breaker import RestClosed, RestOpened
from .journey import Attempt, Skip

__all__ = ["LogObserver", "Observer", "fan_out"]

Observer = Callable[[object], None]


class LogObserver:
    """Loguru lines: a route's first rest of an outage at WARNING with the provider's own
    error text, later rests and every skip or attempt at DEBUG, a recovery at INFO."""

    def __call__(self, record: object) -> None:
        log = logger.opt(depth=0)
        if isinstance(record, RestOpened):
            if record.first:
                log.warning(
                    "policy_router: {} rests {:.0f} s after {} failures: {}",
                    record.route,
                    record.rest,
                    record.failures,
                    record.error,
                )
            else:
                log.debug("policy_router: {} rests again for {:.0f} s", record.route, record.rest)
        elif isinstance(record, RestClosed):
            log.info("policy_router: {} recovered after {} failures", record.route, record.failures)
        elif isinstance(record, Skip | Attempt):
            log.debug("policy_router: {}", record)


def fan_out(observers: Sequence[Observer]) -> Observer:
    """One observer that calls each of `observers`, isolating their failures."""
    broken: set[int] = set()

    def emit(record: object) -> None:
        for observer in observers:
            try:
                observer(record)
            except Exception as error:  # an observer must never fail a call
                if id(observer) not in broken:
                    broken.add(id(observer))
                    logger.warning(
                        "policy_router: observer {!r} raised {!r}; ignoring it", observer, error
                    )

    return emit
