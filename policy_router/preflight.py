"""Preflight: can each route be used at all, asked before a real request needs it?

A route is Ready, Denied (with why: a missing key, a 401/403/404 on the live check) or
Unknown (with why: the check itself could not tell, e.g. the provider was unreachable).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import transport
from .route import Route

__all__ = ["Verdict", "preflight_route"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """A route's preflight verdict: state is "ready", "denied" or "unknown"."""

    state: str
    why: str = ""

    def __str__(self) -> str:
        return self.state if not self.why else f"{self.state}: {self.why}"


def preflight_route(route: Route, live: bool) -> Verdict:
    """Check credentials (LiteLLM's environment validation), then optionally one live call."""
    missing = transport.missing_credentials(route)
    if missing:
        return Verdict("denied", f"missing credentials: {', '.join(missing)}")
    if not live:
        return Verdict("ready")
    fault = transport.ping(route)
    if fault is None:
        return Verdict("ready")
    why = route.redact(f"{fault.status or ''} {fault.message}".strip())
    return Verdict("denied" if fault.kind.about == "route" else "unknown", why)
