"""The checkpoint at the wire: every promise judged on what is about to leave the process.

LiteLLM builds the final URL, headers and body of a request, logs them in its pre-call log
(read through the attempt's `Wire`), and only then calls its HTTP client. At that moment an
attempt's `Checkpoint` reads what is really there and may stop it, so nothing is sent:

- **the on-device floor**: the URL LiteLLM will use (not the `api_base` written on the
  route: an `OLLAMA_API_BASE`, a global `litellm.api_base`, a provider default all move
  it) must be this machine (loopback) or the host the route declared on-device; and the
  proxy the HTTP client will take from the environment (`HTTP_PROXY`, `HTTPS_PROXY`,
  `ALL_PROXY`, less `NO_PROXY`) must be none, or itself on this machine;
- **the header values**: a value with a CR or LF in it cannot be sent;
- **the budget's bound**: the body as sent (its reply caps under any provider's name, its
  choice count, `extra_body` merged, its tools, every billed byte) must not bill more than
  the attempt reserved; a tool the provider runs itself, in any spelling, has no bound
  (refused under a strict budget, else counted as overshoot possible).

A stop is recorded as "not sent to ROUTE (why)": no attempt, no spend, no health record.
What the checkpoint cannot read falls on the safe side: an on-device attempt whose URL
LiteLLM did not log is stopped; a budgeted one whose body it did not log is unbounded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..ground.money import Money
from ..ground.outcome import Fault, FaultKind, Wire
from ..ground.reach import host_of, is_loopback, proxy_for
from ..policies.budget import Ledger, RequestFacts, Reservation
from ..policies.candidate import Candidate
from ..policies.sent_body import body_of, choices, prompt_bytes, reply_cap, server_tool

__all__ = ["Checkpoint", "judge_for", "proxied", "wire_for"]


class Checkpoint:
    """One attempt's checkpoint (see the module docstring): called by its `Wire` with
    LiteLLM's pre-call details, it returns the reason not to send, or None."""

    __slots__ = ("candidate", "currency", "facts", "floor", "held", "strict")

    def __init__(
        self,
        candidate: Candidate,
        *,
        floor: bool,
        held: Reservation | None = None,
        facts: RequestFacts | None = None,
        strict: bool = False,
        currency: str = "USD",
    ) -> None:
        self.candidate = candidate
        self.floor = floor
        self.held = held if held is not None and held.price is not None else None
        self.facts = facts
        self.strict = strict
        self.currency = currency

    def __call__(self, details: Mapping[str, Any], wire: Wire) -> Fault | None:
        extra = details.get("additional_args")
        extra = extra if isinstance(extra, Mapping) else {}
        refused = _headers(extra.get("headers"))
        if refused is None and self.floor:
            refused = self._floor(extra.get("api_base"))
        if refused is None and self.held is not None:
            refused = self._bound(extra, wire)
        return refused

    # -- the floor --------------------------------------------------------------------------
    def _floor(self, api_base: Any) -> Fault | None:
        route = self.candidate.route
        if api_base is None or not str(api_base).strip():
            return _stop(
                FaultKind.ACCESS,
                "on_device=True: LiteLLM did not say which URL it sends this request to, so "
                "it cannot be checked to stay on this machine",
            )
        url = str(api_base)
        host = host_of(url)
        declared = route.kwargs.get("api_base") or route.kwargs.get("base_url")
        own = host_of(str(declared)) if route.reach_declared and declared else None
        if not (is_loopback(host) or (own is not None and host == own)):
            return _stop(
                FaultKind.ACCESS,
                f"on_device=True: LiteLLM sends this request to {_shown(url)}, which is not "
                "this machine" + (f" nor the route's declared host {own}" if own else "")
                + "; check LiteLLM's base URL settings for this provider (its *_API_BASE "
                "variable, litellm.api_base)",
            )
        return proxied(url)

    # -- the bound --------------------------------------------------------------------------
    def _bound(self, extra: Mapping[str, Any], wire: Wire) -> Fault | None:
        held = self.held
        assert held is not None and held.price is not None
        body = body_of(extra)
        if body is None:
            return self._unbounded(wire, "LiteLLM logged no body to hold the bound to")
        tool = server_tool(body)
        if tool is not None:
            return self._unbounded(
                wire, f"{tool} in the body is a tool the provider runs itself and bills by "
                "what it reads",
            )
        facts = self.facts
        batch = facts.batch if facts is not None else 1
        extra_out = facts.reply_extra if facts is not None else 0
        reply = 0
        if facts is None or facts.generates:
            per = reply_cap(body)
            if per is None:
                per = self.candidate.reply_limit
            if per is None:
                return self._unbounded(
                    wire, "the body sets no reply cap and the model's output limit is unknown"
                )
            reply = choices(body) * batch * per + extra_out
        prompt = prompt_bytes(body)
        worst = held.price.worst_case(prompt, reply)
        if worst > held.amount and held.bounded:
            return _stop(
                FaultKind.ACCESS,
                f"the body LiteLLM built for this route could bill {Money(worst, self.currency)} "
                f"(prompt up to {prompt} tokens, reply up to {reply}), more than the "
                f"{Money(held.amount, self.currency)} reserved for it",
            )
        return None

    def _unbounded(self, wire: Wire, why: str) -> Fault | None:
        if self.strict:
            return _stop(
                FaultKind.ACCESS,
                f"no finite worst case under a strict budget: {why}",
            )
        wire.unbounded = why  # sent, and counted as overshoot possible
        return None


def wire_for(
    candidate: Candidate,
    held: Reservation | None,
    floor: bool,
    ledger: Ledger | None,
    facts: RequestFacts | None,
) -> Wire:
    """An attempt's wire, with a checkpoint when a promise is to be judged there (see
    `judge_for`)."""
    return Wire(judge_for(candidate, held, floor, ledger, facts))


def judge_for(
    candidate: Candidate,
    held: Reservation | None,
    floor: bool,
    ledger: Ledger | None,
    facts: RequestFacts | None,
) -> Checkpoint | None:
    """An attempt's checkpoint, when a promise is to be judged at its wire: the on-device
    `floor`, or a reservation the body as sent must not outgrow; None when neither."""
    if not floor and (held is None or held.price is None):
        return None
    return Checkpoint(
        candidate,
        floor=floor,
        held=held,
        facts=facts,
        strict=ledger is not None and ledger.budget.strict,
        currency=ledger.currency if ledger is not None else "USD",
    )


def proxied(url: str) -> Fault | None:
    """The refusal of an on-device request to `url` that a proxy variable of the
    environment would carry off this machine (see `ground.reach.proxy_for`), or None."""
    proxy = proxy_for(url, os.environ)
    if proxy is None or is_loopback(host_of(proxy[1])):
        return None
    name, value = proxy
    host = host_of(url) or url
    return _stop(
        FaultKind.ACCESS,
        f"on_device=True: {name}={_shown(value)} would carry this request through a "
        f"proxy off this machine; add {host} to NO_PROXY (no_proxy) or unset {name}",
    )


def _headers(headers: Any) -> Fault | None:
    if not isinstance(headers, Mapping):
        return None
    for name, value in headers.items():
        if isinstance(value, str) and ("\r" in value or "\n" in value):
            return _stop(
                FaultKind.BAD_REQUEST,
                f"header {name!s} has a line break in its value, which HTTP cannot carry; "
                "remove the CR/LF from it",
            )
    return None


def _stop(kind: FaultKind, why: str) -> Fault:
    return Fault(kind, None, why, sent=False, local=why if kind is FaultKind.BAD_REQUEST else None)


def _shown(url: str) -> str:
    """A URL without its user, password, query and fragment (a key often rides there)."""
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        netloc = parts.hostname or ""
        if parts.port:
            netloc += f":{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return "(a URL that cannot be parsed)"
