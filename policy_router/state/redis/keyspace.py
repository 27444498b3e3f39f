"""Where a RedisStore's keys live, and the operations on all of them at once.

Every key of a store is under its key prefix: the namespace, or on a Redis Cluster the
namespace as a hash tag (`{policy_router:<router>}:...`), so that all of one router's keys
hash to one slot and every script's keys live on one node. One router's state is then on
one shard; different routers (different names or namespaces) spread over the cluster.
"""

from __future__ import annotations

import re
from typing import Any

from ..memory import InMemoryStore
from .link import Link

__all__ = ["KeySpace"]

_Client = Any  # redis-py's clients are taken as Any (see `link.py`)


class KeySpace:
    """The key prefix of a `RedisStore`'s `namespace` on `link`, and the operations on all
    its keys at once; `local` is the store's own view in this process, reset with them."""

    __slots__ = ("_link", "_local", "index", "namespace", "space")

    def __init__(self, namespace: str, link: Link, local: InMemoryStore) -> None:
        self.namespace = namespace
        self._link = link
        self._local = local
        # On a Redis Cluster every key of a namespace carries it as a hash tag: one slot,
        # so each script's keys (a route's health, its window, the budget) live together.
        self.space = f"{{{namespace}}}" if link.cluster else namespace
        self.index = f"{self.space}:routes"  # the routes with a health record

    def budget_key(self, budget: str) -> str:
        return f"{self.space}:budget:{budget}"

    def health_key(self, route: str) -> str:
        return f"{self.space}:health:{route}"

    def reset_health(self, route: str | None = None) -> None:
        """Forget health records, in Redis for every process sharing them.

        Raises StoreUnavailableError when Redis cannot be reached (this process's own view
        is reset all the same).
        """
        self._local.reset_health(route)

        def op(r: _Client) -> None:
            names = [route] if route is not None else list(r.smembers(self.index))
            if names:
                r.delete(*(self.health_key(n) for n in names))
                r.srem(self.index, *names)
            # A provider's 429 closed a window until its Retry-After: forgotten too.
            closed = (
                [f"{self.space}:rate:{route}:closed"]
                if route is not None
                else list(r.scan_iter(match=f"{self.space}:rate:*:closed"))
            )
            for key in closed:
                r.delete(key)

        self._link.run(op)

    def drop_reservations(self, budget: str) -> int:
        """Set a budget's reserved amount to zero and return what it was, in micro-units.

        For reservations left by processes that were killed during a call (they shrink the
        cap until dropped). Call it only while no process is making calls under this
        budget: a running call's reservation would be dropped too, and its settle would then
        count its cost against a reservation that no longer exists. Spending is kept.
        """
        key = self.budget_key(budget)

        def op(r: _Client) -> int:
            pipe = r.pipeline(transaction=True)
            pipe.hget(key, "reserved")
            pipe.hset(key, "reserved", 0)
            pipe.delete(f"{key}:holds")
            held, _, _ = pipe.execute()
            return int(held or 0)

        return self._link.run(op)

    def clear(self) -> None:
        """Delete every key under this store's namespace: spending, reservations, health
        and rate windows.

        For tests and for starting a budget afresh; every process sharing the namespace
        sees it at once. Reservations of calls still running are dropped too.
        """
        pattern = re.sub(r"([*?\[\]\\])", r"\\\1", self.space) + ":*"

        def op(r: _Client) -> None:
            keys = list(r.scan_iter(match=pattern, count=500))
            if keys:
                r.delete(*keys)

        self._link.run(op)
        self._local.reset_health()
