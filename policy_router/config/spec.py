"""The schema of a policy file: what each key may hold, strict (`extra="forbid"`) so that a
typo is an error naming its place. `policy_file` reads a file into it and builds the
router's arguments from it."""

from __future__ import annotations

import difflib
import re
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.functional_validators import AfterValidator

from ..drive.seam import model_info
from ..policies.order import Order
from ..policies.orderings import named
from ..policies.retry import Retry
from .observing import MetricsSpec, ObserversSpec

__all__ = [
    "BreakerSpec", "BudgetSpec", "GroupSpec", "HedgeSpec", "KeySpec", "PolicySpec", "RetrySpec",
    "RouteSpec", "ServerSpec", "StoreSpec",
]

_HEX64 = re.compile(r"\A[0-9a-f]{64}\Z")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class RetrySpec(_Strict):
    attempts: int = 2
    """Requests a route may get per request, the first included."""
    backoff: float = 0.5
    """Seconds before the first retry, doubling each time."""
    max_backoff: float = 8.0
    """The longest wait; a longer Retry-After moves on to the next route."""
    jitter: bool = True
    """Draw each wait from its upper half, so that callers do not retry in step."""
    on: list[str] | None = None
    """The faults retried (`[server_error, timeout, ...]`); absent: all but timeouts."""
    routes: Literal["all", "first"] = "all"
    """`first`: only the first route the request was sent to is retried."""
    rate_limited_wait: float = 5.0
    """The longest Retry-After a 429 may name and still be waited out on its route (0: the
    next route is asked at once)."""

    def made(self) -> Retry:
        given = self.model_dump(exclude_none=True)
        return Retry(**given)


class RouteSpec(BaseModel):
    """One route: our fields, plus any LiteLLM keyword argument."""

    model_config = ConfigDict(extra="allow", frozen=True, use_attribute_docstrings=True)

    model: str
    """LiteLLM's model string (`openai/gpt-4o-mini`, `ollama/llama3`, ...)."""
    name: str | None = None
    """How the route is shown in journeys and logs (default: its model)."""
    id: str | None = None
    """The route's identity for health, rate windows and history (default: model and host)."""
    reach: Literal["on_device", "vendor"] | None = None
    """Declared reach; absent, it is inferred, failing closed (a vendor)."""
    capabilities: dict[str, bool] | None = None
    """What the route can do (`tools`, `images`, `streaming`, ...), over LiteLLM's model info."""
    prices: str | dict[str, Any] | None = None
    """A price table: a name in `price_tables`, a file, `default` (the shipped table), a table
    inline, or `free` (a model you serve yourself: zero per token, admitted by a budget)."""
    retry: RetrySpec | None = None
    output_limit: int | None = None
    context_window: int | None = None
    first_token_timeout: float | None = None
    stall_timeout: float | None = None
    rpm: int | None = None
    """The account's requests per minute, counted before the provider's 429."""
    tpm: int | None = None
    """The account's tokens per minute, likewise."""
    enabled: bool = True
    """`false` keeps the route in its group and skips it."""

    @model_validator(mode="after")
    def _known_kwargs(self) -> RouteSpec:
        known = model_info.litellm_kwargs()
        own = list(type(self).model_fields)  # the route's own keys: this class's fields
        for key in self.model_extra or {}:
            if key not in known:
                close = difflib.get_close_matches(key, [*own, *known], n=1, cutoff=0.75)
                raise ValueError(
                    f"{key!r} is neither a route field ({', '.join(sorted(own))}) "
                    "nor a LiteLLM argument" + (f"; did you mean {close[0]!r}?" if close else "")
                )
        return self


class HedgeSpec(_Strict):
    after: float | Literal["p95"] = "p95"
    """When a second attempt starts: seconds, or the route's own 95th percentile."""
    at_least: float = 0.05
    """The shortest wait before a hedge, in seconds."""
    otherwise: float = 2.0
    """The wait while a route has too few samples for its percentile."""
    samples: int = 20
    """How many of a route's latencies make its percentile."""
    max_share: float = 0.1
    """The most hedges per request of the group, over its recent requests."""


class GroupSpec(_Strict):
    order: Annotated[str, AfterValidator(named)] = Order.AS_LISTED.value
    """The ordering by name: `as_listed`, `cheapest`, `round_robin`, ..., or a registered one."""
    routes: list[RouteSpec] = Field(min_length=1)
    """The group's routes, as listed."""
    hedge: HedgeSpec | Literal[False] | None = None
    """The group's own hedge (`false`: none, whatever the file's `hedge` says)."""


class BudgetSpec(_Strict):
    cap: str | int | Decimal
    """The most the router may spend, exactly (`"5.00"`: a string, never a float)."""
    currency: str = "USD"
    """The cap's currency; a route priced in another is refused."""
    unpriced: Literal["refuse", "allow"] = "refuse"
    """What a route without a price may do under the budget."""
    strict: bool = False
    """Refuse a call whose worst case has no finite bound, so the cap can never be passed."""
    period: Literal["day", "week", "month"] | float | None = None
    """When spending starts again at zero: `day`, `week` (ISO), `month`, or seconds (a fixed
    window); absent: never."""
    tz: str | None = None
    """The zone of a day, week or month (`Europe/Oslo`; absent: UTC)."""
    per: Literal["user", "tag", "key", "team"] | None = None
    """Each end user (the call's `user`), tag, key or team its own cap."""
    user: str | None = None
    """One end user, all its calls together."""
    tag: str | None = None
    """Every call carrying this tag (`metadata.tags`, or `x-policy-router-tags`), together."""
    key: str | None = None
    """One server key's calls."""
    team: str | None = None
    """One server team's calls."""
    route: str | None = None
    """A route's id or name: the route is skipped, not the call, once it cannot take one."""
    provider: str | None = None
    """A provider's routes (`openai`), as `route` is."""
    warn_at: list[float] = Field(default_factory=list)
    """Fractions of the cap (0.5, 0.8) whose crossing is told once per period (a warning, an
    event, the server's webhook)."""

    def budget(self, cap: Any = None, name: str = "budget", **scope: str) -> Any:
        """The `Budget` this section says (`cap` its cap as read, `scope` one the file
        places it under: a team's, a key's)."""
        from ..policies.budget import Budget

        named = {k: getattr(self, k) for k in ("per", "user", "tag", "key", "team", "route", "provider") if getattr(self, k) is not None}
        return Budget(
            self.cap if cap is None else cap, self.currency, unpriced=self.unpriced, strict=self.strict, name=name,
            period=self.period, tz=self.tz, warn_at=tuple(self.warn_at), **named, **scope,  # type: ignore[arg-type]
        )

    @field_validator("cap", mode="before")
    @classmethod
    def _exact(cls, value: Any) -> Any:
        if isinstance(value, float):
            raise ValueError(
                f'{value!r} is a float, which cannot hold money exactly; write "{value}" as a '
                "string (a YAML or TOML file is read exactly as written)"
            )
        return value


class BreakerSpec(_Strict):
    failures: int = 3
    """Consecutive provider faults that rest a route."""
    cooldown: float = 5.0
    """The first rest, in seconds; a failed probe doubles it."""
    max_cooldown: float | None = None
    """The longest rest a doubling reaches (absent: 15 s)."""
    settled: float = 3600.0
    """The rest after a 401/403/404, which does not heal by itself."""
    rate_limited_cooldown: float | None = None
    """The rest after a 429 that names no Retry-After (absent: `cooldown`)."""


class StoreSpec(_Strict):
    redis: str | None = None
    """The Redis URL (`redis://`, `rediss://` for TLS; `os.environ/NAME` keeps it out of the file)."""
    sqlite: str | None = None
    """A SQLite file (relative to the policy file): kept across restarts, shared on one machine."""
    lease: float = Field(default=3600.0, gt=0)
    """SQLite: seconds a reservation of a process that died is held before it is charged."""
    settle_within: float = Field(default=0.0, ge=0, le=60)
    """SQLite: seconds an answered call's settlement may wait to be written with the next
    transaction (0: at once; see `SQLiteStore`)."""
    namespace: str | None = None
    """The keys' prefix (default: the router's name)."""
    timeout: float = Field(default=0.5, gt=0)
    """Seconds each command has to connect and be answered; past it, the store is down."""
    retry_every: float = Field(default=1.0, gt=0)
    """Seconds between attempts to reach a store that went down."""
    cluster: bool = False
    """The URL names a node of a Redis Cluster."""

    @model_validator(mode="after")
    def _one_store(self) -> StoreSpec:
        if (self.redis is None) == (self.sqlite is None):
            raise ValueError("give exactly one of redis (a URL) and sqlite (a file)")
        return self


class KeySpec(_Strict):
    team: str | None = None
    """The team this key's calls also count against (`server.teams`)."""
    key: str | None = None
    """The key (`os.environ/NAME`: read from the environment); hashed when loaded."""
    key_sha256: str | None = None
    """The key's SHA-256 in hex: the file then holds no key at all."""
    budget: BudgetSpec | None = None
    """This key's own budget, shared by every server process on one store."""
    rpm: int | None = Field(default=None, gt=0)
    """The most requests this key may make in any minute, across server processes."""
    on_device: bool = False
    """Every request of this key is held to the on-device floor, whatever it asks."""
    groups: list[str] | None = Field(default=None, min_length=1)
    """The groups this key may call (absent: every group); others answer 404."""

    @model_validator(mode="after")
    def _one_key(self) -> KeySpec:
        if (self.key is None) == (self.key_sha256 is None):
            raise ValueError("give exactly one of key (os.environ/NAME) and key_sha256")
        if self.key_sha256 is not None and not _HEX64.match(self.key_sha256.lower()):
            raise ValueError("key_sha256 must be 64 hex digits (sha256sum of the key)")
        return self


class TeamSpec(_Strict):
    budget: BudgetSpec | None = None
    """What every key of the team spends together."""


class AdminKeySpec(_Strict):
    key: str | None = None
    """The key (`os.environ/NAME`); hashed when loaded."""
    key_sha256: str | None = None
    """The key's SHA-256 in hex."""

    @model_validator(mode="after")
    def _one_key(self) -> AdminKeySpec:
        if (self.key is None) == (self.key_sha256 is None):
            raise ValueError("give exactly one of key (os.environ/NAME) and key_sha256")
        if self.key_sha256 is not None and not _HEX64.match(self.key_sha256.lower()):
            raise ValueError("key_sha256 must be 64 hex digits (sha256sum of the key)")
        return self


class AlertsSpec(_Strict):
    webhook: str | None = None
    """A URL each budget threshold crossed is POSTed to as JSON (`os.environ/NAME` allowed)."""


class ServerSpec(_Strict):
    keys: dict[str, KeySpec] = Field(default_factory=dict)
    """The API keys the server accepts, by a name that is safe to print."""
    teams: dict[str, TeamSpec] = Field(default_factory=dict)
    """Teams of keys, each with a budget its keys spend together."""
    admin_keys: dict[str, AdminKeySpec] = Field(default_factory=dict)
    """Keys that may read every scope's spending and set caps live (`/v1/spend`,
    `/v1/budgets/{scope}`); they call no model."""
    state: str | None = None
    """The SQLite file the server keeps its state in when the file names no `store:`
    (default: beside the policy file, `<file>.state.sqlite`)."""
    alerts: AlertsSpec | None = None
    """Where budget thresholds are told (`webhook`)."""
    max_body_mb: float = Field(default=32.0, gt=0)
    """The largest request body read, in MiB; a longer one is refused with 413."""
    shutdown_grace: float = Field(default=10.0, ge=0)
    """Seconds requests in flight are given to finish after SIGTERM before they are
    cancelled (and settled)."""


class PolicySpec(_Strict):
    name: str = "default"
    """The router's name: its keys in a shared store, its metrics scope by default."""
    groups: dict[str, GroupSpec] = Field(min_length=1)
    """The groups by the name a call's `model=` gives, each with its routes."""
    price_tables: dict[str, str | dict[str, Any]] = Field(default_factory=dict)
    """Named price tables (a file beside this one, or a table inline) a route's `prices` names."""
    budget: BudgetSpec | None = None
    """A cap on what the router may spend (`Budget`); on a server, the whole server's."""
    budgets: list[BudgetSpec] = Field(default_factory=list)
    """More budgets, each over a scope and a period (`per: user`, `tag: ...`, `route: ...`)."""
    breaker: BreakerSpec | Literal[False] | None = None
    """Absent: the router's default breaker; `false` (or null): none; else its fields."""
    retry: RetrySpec | None = None
    """Same-route retries for every route (`Retry`); a route's own `retry` wins."""
    hedge: HedgeSpec | None = None
    """A second attempt beside a slow first one (`Hedge`)."""
    deadline: float | None = Field(default=None, gt=0)
    """Seconds the whole request may take, across routes and retries."""
    wait_for_capacity: bool = False
    """Wait, within the deadline, for a rate window's first free slot instead of refusing."""
    store: StoreSpec | str | None = None
    """Where health, spend and windows live: `{redis: URL}` (shared by every process that
    names it), or `sqlite:///path` (a file, kept across restarts, shared on one machine);
    absent: this process (`policy-router serve`: `server.state`)."""
    observers: ObserversSpec | None = None
    """Who hears each skip, attempt and rest (the log, the attempt log, OpenTelemetry)."""
    metrics: MetricsSpec | None = None
    """Where every attempt is recorded, for `Order.SCORE` and the report."""
    metrics_scope: str | None = Field(default=None, min_length=1)
    """The scope the router's history is written under (default: its name)."""
    score: dict[str, Any] | None = None  # Score's fields (checked by learning_policies)
    server: ServerSpec | None = None
    """What `policy-router serve` accepts: its API keys, each a tenant (`config.keys`)."""
