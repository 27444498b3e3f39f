"""Where a RedisStore's keys live, and the operations on all of them at once.

Every key of a store is under its key prefix: the namespace, or on a Redis Cluster the
namespace as a hash tag (`{policy_router:<router>}:...`), so that all of one router's keys
hash to one slot and every script's keys live on one node. One router's state is then on
one shard; different routers (different names or namespaces) spread over the cluster.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..memory import InMemoryStore
from . import budget as budget_script
from .link import Link

__all__ = ["KeySpace"]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)

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

    def keyed(self, accounts: Sequence[str]) -> list[str]:
        """The Redis keys of budget accounts."""
        return [self.budget_key(a) for a in accounts]

    def reserve_all(self, accounts: Sequence[tuple[str, int | None]], hold: str, amount: int) -> int:
        """`Store.reserve_all`: one script over every account."""
        script = budget_script.reserve_all([(self.budget_key(a), cap) for a, cap in accounts], hold, amount)
        return int(self._link.run(lambda r: r.eval(*script))) - 1

    async def areserve_all(self, accounts: Sequence[tuple[str, int | None]], hold: str, amount: int) -> int:
        script = budget_script.reserve_all([(self.budget_key(a), cap) for a, cap in accounts], hold, amount)
        return int(await self._link.arun(lambda r: r.eval(*script))) - 1

    def settle_all(self, accounts: Sequence[str], hold: str, cost: int, *, measured: bool, bounded: bool) -> None:
        self._link.write(budget_script.settle(self.keyed(accounts), hold, cost, measured, bounded))

    async def asettle_all(self, accounts: Sequence[str], hold: str, cost: int, *, measured: bool, bounded: bool) -> None:
        await self._link.awrite(budget_script.settle(self.keyed(accounts), hold, cost, measured, bounded))

    def release_all(self, accounts: Sequence[str], hold: str) -> None:
        self._link.write(budget_script.release(self.keyed(accounts), hold))

    async def arelease_all(self, accounts: Sequence[str], hold: str) -> None:
        await self._link.awrite(budget_script.release(self.keyed(accounts), hold))

    def budget_accounts(self) -> list[str]:
        """Every budget account there is in Redis (each scope in each period it spent in)."""
        prefix = f"{self.space}:budget:"
        pattern = re.sub(r"([*?\[\]\\])", r"\\\1", prefix) + "*"

        def op(r: _Client) -> list[str]:
            names = (k.decode() if isinstance(k, bytes) else str(k) for k in r.scan_iter(match=pattern, count=500))
            return [
                n[len(prefix):] for n in names
                if not n.endswith(":holds") and ":done:" not in n[len(prefix):]
            ]

        return self._link.run(op)

    def budget_caps(self) -> dict[str, str]:
        """The caps set live, by scope."""
        key = f"{self.space}:budget-caps"
        found = self._link.run(lambda r: r.hgetall(key))
        return {_text(k): _text(v) for k, v in found.items()}

    async def abudget_caps(self) -> dict[str, str]:
        key = f"{self.space}:budget-caps"
        found = await self._link.arun(lambda r: r.hgetall(key))
        return {_text(k): _text(v) for k, v in found.items()}

    def set_budget_cap(self, scope: str, cap: str | None) -> None:
        key = f"{self.space}:budget-caps"
        if cap is None:
            self._link.run(lambda r: r.hdel(key, scope))
        else:
            self._link.run(lambda r: r.hset(key, scope, cap))

    def claim(self, name: str, seconds: float) -> bool:
        """True the first time `name` is claimed in `seconds`, in every process."""
        key = f"{self.space}:claim:{name}"
        return bool(self._link.run(lambda r: r.set(key, "1", nx=True, ex=max(int(seconds), 1))))

    async def aclaim(self, name: str, seconds: float) -> bool:
        key = f"{self.space}:claim:{name}"
        return bool(await self._link.arun(lambda r: r.set(key, "1", nx=True, ex=max(int(seconds), 1))))

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
