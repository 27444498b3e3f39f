"""The server's tenants: one per API key, each with a router of its own over the routes,
health and rate windows every key shares, and the key's own budget and rate limit.

All the tenants' routers share one store (the policy file's `store:`, else one in this
process), under one router name: a route that rests, rests for every key, and a route's
rate window counts every key's requests. A key's budget is a budget of its own name
(`key:<name>`) in that store, so every server process on one Redis holds it; a key without
one spends from the file's `budget:`, shared by such keys. A key's `rpm` is a rate window
of its own in the store, counted across processes too.
"""

from __future__ import annotations

import hmac
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config.keys import ApiKey, check_distinct, digest, plain_key
from ..config.litellm import Loaded
from ..ground.clock import MonotonicClock
from ..ground.errors import ConfigError
from ..router import Router
from ..state.memory import InMemoryStore
from .owners import Owners

__all__ = ["ENV_KEY", "Tenant", "Tenants", "Unauthorized"]

ENV_KEY = "POLICY_ROUTER_API_KEY"
"""The environment variable whose value is one more API key, named `default`."""


class Unauthorized(Exception):
    """No key, or a key the server does not know: a 401, whatever else the request says."""


@dataclass(frozen=True, slots=True)
class Tenant:
    """One API key and the router its requests take."""

    key: ApiKey
    router: Router


class Tenants:
    """Every key of the server and its router (see the module docstring)."""

    def __init__(self, loaded: Loaded, env: Mapping[str, str]) -> None:
        keys = list(loaded.keys)
        if env.get(ENV_KEY) is not None:
            keys.append(ApiKey(name="default", sha256=digest(plain_key(env[ENV_KEY], ENV_KEY))))
        if not keys:
            raise ConfigError(
                "policy-router serve needs at least one API key: a server.keys section in "
                f"the policy file, or {ENV_KEY} in the environment"
            )
        names = [k.name for k in keys]
        if len(set(names)) != len(names):
            raise ConfigError(f"server.keys: the key name 'default' is {ENV_KEY}'s; rename yours")
        check_distinct(tuple(keys), f"server.keys and {ENV_KEY}")
        policies = dict(loaded.policies)
        self._owned = policies.get("store") is not None
        self.store: Any = policies.setdefault("store", InMemoryStore())
        self.deadline: float | None = policies.get("deadline")
        self._windows = self.store.bind(policies.get("name", "default"), MonotonicClock(), lambda _: None)
        self.owners = Owners(self._windows)
        self._tenants = [
            Tenant(key, Router(loaded.routes, **{**policies, "budget": key.budget or policies.get("budget")}))
            for key in keys
        ]

    @property
    def all(self) -> list[Tenant]:
        return list(self._tenants)

    def find(self, authorization: str | None) -> Tenant:
        """The tenant whose key the `Authorization: Bearer <key>` header carries; compared
        by SHA-256 in constant time, every key asked. Only spaces and tabs around the key
        are dropped: any other character is part of what was presented."""
        if not authorization or authorization[:7].lower() != "bearer ":
            raise Unauthorized("no API key: send Authorization: Bearer <key>")
        token = authorization[7:].strip(" \t")
        if not token:
            raise Unauthorized("no API key: send Authorization: Bearer <key>")
        presented = digest(token)
        found = None
        for tenant in self._tenants:
            if hmac.compare_digest(presented, tenant.key.sha256):
                found = tenant
        if found is None:
            raise Unauthorized("the API key is not one this server accepts")
        return found

    async def admit(self, tenant: Tenant, slot: str) -> float | None:
        """Take a slot in the key's rate window: None when taken (or the key has no
        `rpm`), else the seconds until one frees. A store that cannot be reached raises
        `StoreUnavailableError`: the request is refused, not let through."""
        rpm = tenant.key.rpm
        if rpm is None:
            return None
        window_of = f"key:{tenant.key.name}"
        if getattr(self._windows, "remote", False):
            window = await self._windows.atake(window_of, slot, 0, rpm, None)
        else:
            window = self._windows.take(window_of, slot, 0, rpm, None)
        if window.taken:
            return None
        frees = max(window.frees_in, window.closed_for)
        return frees if math.isfinite(frees) else 60.0

    async def done(self, tenant: Tenant, slot: str) -> None:
        """The request whose slot this is was answered or refused: it stays counted."""
        if tenant.key.rpm is None:
            return
        window_of = f"key:{tenant.key.name}"
        if getattr(self._windows, "remote", False):
            await self._windows.afinish(window_of, slot, 0)
        else:
            self._windows.finish(window_of, slot, 0)

    async def aclose(self) -> None:
        """Close every tenant's router, then the store the file named (the server's)."""
        for tenant in self._tenants:
            await tenant.router.aclose()
        if self._owned:
            aclose = getattr(self.store, "aclose", None)
            await aclose() if aclose is not None else self.store.close()
