"""The server's tenants: its API keys, each a scope of one router.

One router serves every key. A key is a scope of its budgets, not a router of its own: a
request from a key falls under the server's budget (the file's `budget:`), its team's
(`server.teams`), its own (`server.keys.<name>.budget`), its user's and its tags' (the
file's `budgets:`), each reserved at once (`policies.scopes`). Health, rate windows and
spending live in one store: the file's `store:`, else the SQLite file `server.state`
(beside the policy file by default), so a restart keeps every scope's period-to-date spend
and what rests, and every worker on the machine shares it. A key's `rpm` is a rate window of
its own in that store; `on_device` and `groups` hold its requests to what it may do.
Admin keys (`server.admin_keys`) read and set budgets; they call no model.
"""

from __future__ import annotations

import hmac
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config.keys import ApiKey, check_distinct, digest, plain_key, scoped_budgets
from ..config.litellm import Loaded, secret
from ..ground.clock import MonotonicClock
from ..ground.errors import ConfigError
from ..router import Router
from ..state.memory import InMemoryStore
from .alerts import Webhook
from .owners import Owners

__all__ = ["ENV_KEY", "Forbidden", "Tenant", "Tenants", "Unauthorized", "budgets_of", "over_rpm", "state_of", "store_of"]

ENV_KEY = "POLICY_ROUTER_API_KEY"
"""The environment variable whose value is one more API key, named `default`."""


class Unauthorized(Exception):
    """No key, or a key the server does not know: a 401, whatever else the request says."""


@dataclass(frozen=True, slots=True)
class Tenant:
    """One API key and the router its requests take (the server's one router)."""

    key: ApiKey
    router: Router

    @property
    def scope(self) -> dict[str, str]:
        """The router's `scope=` for this key's calls: its key, and its team if it has one."""
        return {"key": self.key.name, **({"team": self.key.team} if self.key.team else {})}


SETTLE_WITHIN = 0.05
"""Seconds an answered call's settlement may wait for the next call's reservation in the
state file the server keeps (`SQLiteStore(settle_within=)`): one write transaction a call
under traffic instead of two; the hold reads as held that much longer in other workers."""


def store_of(loaded: Loaded) -> Any:
    """The server's store: the file's `store:`, else its SQLite state (`state_of`), else
    (a mapping with no `server.state`) one in this process."""
    store = loaded.policies.get("store")
    if store is not None:
        return store
    path = state_of(loaded)
    if path is None:
        return InMemoryStore()
    from ..state.sqlite import SQLiteStore

    return SQLiteStore(path, settle_within=SETTLE_WITHIN)


def budgets_of(loaded: Loaded) -> list[Any]:
    """Every budget the server holds besides the file's own `budget:`: the file's
    `budgets:`, each team's, and each key's (whether or not its key is set)."""
    return [*loaded.policies.get("budgets", ()), *scoped_budgets(loaded.server, loaded.source)]


def state_of(loaded: Loaded) -> Path | None:
    """Where the server keeps its state when the file names no store: `server.state`
    (relative to the file), else beside the file; None for a mapping with neither."""
    named = getattr(loaded.server, "state", None) if loaded.server is not None else None
    base = loaded.base
    if named is not None:
        path = Path(named)
        return path if path.is_absolute() or base is None else base / path
    if base is None:
        return None
    return Path(base) / f"{Path(loaded.source).stem}.state.sqlite"


class Tenants:
    """Every key of the server, over one router (see the module docstring)."""

    def __init__(self, loaded: Loaded, env: Mapping[str, str]) -> None:
        keys = list(loaded.keys)
        if env.get(ENV_KEY) is not None:
            keys.append(ApiKey(name="default", sha256=digest(plain_key(env[ENV_KEY], ENV_KEY))))
        if not any(not k.admin for k in keys):
            raise ConfigError(
                "policy-router serve needs at least one API key: a server.keys section in "
                f"the policy file, or {ENV_KEY} in the environment"
            )
        names = [k.name for k in keys]
        if len(set(names)) != len(names):
            raise ConfigError(f"server.keys: the key name 'default' is {ENV_KEY}'s; rename yours")
        check_distinct(tuple(keys), f"server.keys and {ENV_KEY}")
        policies = dict(loaded.policies)
        store = store_of(loaded)
        self.store: Any = store
        self.deadline: float | None = policies.get("deadline")
        budgets = budgets_of(loaded)
        observers = list(policies.get("observers") or ())
        hook = _webhook(loaded)
        if hook is not None:
            observers.append(hook)
        self.webhook = hook
        own = policies.get("budget")
        self.currency = next((b.cap.currency for b in [own, *budgets] if b is not None), "USD")
        self.router = Router(
            loaded.routes, **{**policies, "store": store, "budgets": budgets, "observers": observers},
        )
        self._windows: Any = self.store.bind(policies.get("name", "default"), MonotonicClock(), lambda _: None)
        self.owners = Owners(self._windows)
        self._tenants = [Tenant(key, self.router) for key in keys]

    @property
    def all(self) -> list[Tenant]:
        return list(self._tenants)

    def find(self, authorization: str | None, *, admin: bool = False) -> Tenant:
        """The tenant whose key the `Authorization: Bearer <key>` header (or Anthropic's
        `x-api-key`, given as `Bearer <key>` by the caller) carries; compared by SHA-256 in
        constant time, every key asked. Only spaces and tabs around the key are dropped:
        any other character is part of what was presented. An admin key is found only with
        `admin` (an admin path), a tenant's only without."""
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
        if found.key.admin != admin:
            raise Forbidden(
                "an admin key calls no model: use a key of server.keys" if found.key.admin
                else "this path needs an admin key (server.admin_keys)"
            )
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
        """Close the router, then the store (the server's own), and the webhook's sender."""
        await self.router.aclose()
        if self.webhook is not None:
            self.webhook.close()
        aclose, close = getattr(self.store, "aclose", None), getattr(self.store, "close", None)
        if aclose is not None:
            await aclose()
        elif close is not None:
            close()


class Forbidden(Exception):
    """A key the server knows, on a path it may not use: a 403."""


def _webhook(loaded: Loaded) -> Webhook | None:
    alerts = getattr(loaded.server, "alerts", None) if loaded.server is not None else None
    if alerts is None or alerts.webhook is None:
        return None
    missing: list[str] = []
    url = secret(alerts.webhook, "server.alerts.webhook", missing)
    if missing:
        raise ConfigError("; ".join(missing))
    return Webhook(str(url))


def over_rpm(tenant: Tenant, wait: float) -> Exception:
    """The refusal of a request past its key's requests a minute (nothing sent)."""
    from ..ground.errors import RateLimitedError

    return RateLimitedError(
        f"API key {tenant.key.name!r} reached its {tenant.key.rpm} requests a minute; "
        f"nothing was sent (a slot frees in {wait:.1f} s)",
        retry_after=wait,
    )
