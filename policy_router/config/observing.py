"""What a policy file says about observing: `observers:` (the attempt log, OpenTelemetry),
and the routing history's `metrics:`, `metrics_scope:` and `score:` keys:

    metrics: {sqlite: metrics.sqlite}          # or {duckdb: PATH}, or {postgres: os.environ/PG_DSN}
    metrics_scope: app:production              # the router's name by default
    score: {success_weight: 2, half_life: 259200}
    groups: {smart: {order: score, routes: [...]}}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from ..ground.errors import ConfigError
from ..observe.extras import need_opentelemetry
from ..observe.metrics import DuckDBMetrics, PostgresMetrics, SQLiteMetrics
from ..observe.observers import AttemptLog
from ..policies.score import Score

__all__ = ["MetricsSpec", "ObserversSpec", "learning_policies", "observers_of"]


class ObserversSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    attempt_log: str | None = None
    otel: bool = False


def observers_of(spec: ObserversSpec, base: Path, source: str) -> list[Any]:
    """The observers `observers:` names; a relative attempt log lives beside the file."""
    observers: list[Any] = []
    if spec.attempt_log:
        log = Path(spec.attempt_log)
        observers.append(AttemptLog(log if log.is_absolute() else base / log))
    if spec.otel:
        try:
            need_opentelemetry()
            from ..observe.otel import OTelObserver
        except ImportError as error:
            raise ConfigError(f"{source}: observers.otel: {error}") from None
        observers.append(OTelObserver())  # the application's global tracer and meter
    return observers


class MetricsSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    sqlite: str | None = None
    duckdb: str | None = None
    postgres: str | None = None
    timeout: float = 2.0
    pool_mode: str = "direct"
    """PostgreSQL only: "direct", "session_pooler" or "transaction_pooler"."""
    allow_unencrypted: bool = False
    """PostgreSQL only: accept a mode that allows plaintext to another machine."""

    @model_validator(mode="after")
    def _one(self) -> MetricsSpec:
        given = [k for k in ("sqlite", "duckdb", "postgres") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(f"name exactly one of sqlite, duckdb, postgres; got {given or 'none'}")
        return self


def learning_policies(
    metrics: MetricsSpec | None,
    scope: str | None,
    score: Mapping[str, Any] | None,
    source: str,
    base: Path | None,
    secret: Any,
) -> dict[str, Any]:
    """The Router arguments these keys make; `secret` reads an `os.environ/NAME` value."""
    out: dict[str, Any] = {}
    if score is not None:
        known = {f.name for f in fields(Score)}
        unknown = sorted(set(score) - known)
        if unknown:
            raise ConfigError(f"{source}: score: unknown key {unknown}; Score takes {sorted(known)}")
        try:
            out["score"] = Score(**score)
        except ConfigError as error:
            raise ConfigError(f"{source}: score: {error}") from None
    if scope is not None:
        out["metrics_scope"] = scope
    if metrics is None:
        return out

    def local(path: str) -> Path:
        p = Path(path)
        return p if p.is_absolute() or base is None else base / p

    try:
        if metrics.sqlite:
            out["metrics"] = SQLiteMetrics(local(metrics.sqlite))
        elif metrics.duckdb:
            out["metrics"] = DuckDBMetrics(local(metrics.duckdb))
        else:
            dsn = secret(metrics.postgres, "metrics.postgres")
            if dsn is not None:
                out["metrics"] = PostgresMetrics(
                    dsn,
                    timeout=metrics.timeout,
                    pool_mode=metrics.pool_mode,
                    allow_unencrypted=metrics.allow_unencrypted,
                )
    except ConfigError as error:
        raise ConfigError(f"{source}: metrics: {error}") from None
    return out
