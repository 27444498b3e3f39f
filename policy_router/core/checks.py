"""The checks that do not change during a request, and `explain`, which runs them all.

A `Candidate` is a route with its capabilities and price looked up once, when the router is
built. `static_skip` applies DESIGN §2's first three checks (known model, requirements,
the on-device floor); `sift` applies them to a group; `explain` gives every route's verdict
for a request, asking the budget what it would do without reserving anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..ground.money import Money
from ..ground.reach import Reach
from ..ground.records import Check, Skip
from ..policies.bounds import RequestFacts, counted_tokens
from ..policies.budget import Ledger
from ..policies.candidate import Candidate
from ..policies.limits import describe
from ..policies.order import DEFAULT_REPLY_TOKENS, Arrange
from ..policies.requirements import Requirements
from ..state.store import perform
from .journey import Explanation, Verdict

__all__ = ["explain", "sift", "static_skip"]


def static_skip(candidate: Candidate, needs: Requirements) -> Skip | None:
    """The first of the checks that do not change during a request that stops a route."""
    skip = _static_skip(candidate, needs)
    # Named by id here, once per (group, needs): a request then copies it without looking
    # its route up (a lookup per skip made planning quadratic in the group's size).
    return None if skip is None else replace(skip, route_id=candidate.route.id)


def _static_skip(candidate: Candidate, needs: Requirements) -> Skip | None:
    route, caps = candidate.route, candidate.capabilities
    if not route.enabled:
        return Skip(route.name, Check.ENABLED, "disabled (enabled=False on the route)")
    if not caps.known:
        return Skip(route.name, Check.KNOWN, "unknown model", detail={"why": caps.why_unknown})
    unmet = needs.unmet_by(caps)
    if unmet:
        names = ", ".join(c.value.replace("_", " ") for c in unmet)
        return Skip(
            route.name,
            Check.REQUIREMENTS,
            f"cannot do {names}",
            detail={"missing": tuple(c.value for c in unmet)},
        )
    if needs.on_device and route.reach is not Reach.ON_DEVICE:
        return Skip(
            route.name,
            Check.FLOOR,
            f"vendor route ({route.reach_reason}); the request is on-device only",
            detail={"reach": route.reach.value},
        )
    return None


def sift(
    candidates: Sequence[Candidate], needs: Requirements
) -> tuple[Sequence[Candidate], Sequence[Skip]]:
    """Split candidates into those the static checks keep and the skips of the others."""
    eligible: list[Candidate] = []
    skips: list[Skip] = []
    for c in candidates:
        skip = static_skip(c, needs)
        if skip is None:
            eligible.append(c)
        else:
            skips.append(skip)
    return tuple(eligible), tuple(skips)


def explain(
    group: str,
    candidates: Sequence[Candidate],
    needs: Requirements,
    ordering: Arrange | None = None,
    ledger: Ledger | None = None,
    facts: RequestFacts | None = None,
    windows: Mapping[str, Any] | None = None,
    notes: Mapping[str, str] | None = None,
    sifted: tuple[Sequence[Candidate], Sequence[Skip]] | None = None,
) -> Explanation:
    """Every route's verdict for a request, in the order the router would consider them.

    Nothing is sent and nothing is reserved: the budget is asked what it would do now, and
    a rate-limited route shows its window ("rpm 42/60"); `notes` (by route id) are what the
    ordering says of each route (`Order.SCORE`: its score and parts). `sifted` is the
    request's own sifting when the caller made it (the context window's skips among them),
    else the static checks are made here.
    """
    eligible, skipped = sifted if sifted is not None else sift(candidates, needs)
    skips = {s.route: s for s in skipped}
    verdicts: list[Verdict] = []
    for c in ordering(eligible) if ordering else eligible:
        reason = (
            f"{c.route.reach.value} ({c.route.reach_reason}); can do {c.capabilities.describe()}"
        )
        if facts is not None and c.price is not None and c.route.prices is not None:
            est = c.price.estimate(facts.prompt_tokens, facts.reply_tokens or DEFAULT_REPLY_TOKENS)
            reason += f"; est. {Money(est, c.route.prices.currency)}"
        if notes and c.id in notes:
            reason += f"; {notes[c.id]}"
        window = (windows or {}).get(c.id)
        if window is not None and (c.route.rpm or c.route.tpm):
            reason += f"; {describe(window, c.route.rpm, c.route.tpm)}"
            rpm, tpm = c.route.rpm, c.route.tpm
            need = counted_tokens(facts, c.sent_cap, c.choices) if facts is not None else 0
            if (
                window.closed_for > 0
                or (rpm and window.requests >= rpm)
                or (tpm and window.tokens + need > tpm)
            ):
                verdicts.append(Verdict(route=c.name, position=None, check=Check.RATE_LIMIT, reason=reason))
                continue
        if ledger is not None and facts is not None:
            verdict = perform(ledger.store, ledger.check(c, facts))
            if isinstance(verdict, Skip):
                verdicts.append(Verdict(route=c.name, position=None, check=verdict.check, reason=verdict.reason))
                continue
        verdicts.append(
            Verdict(route=c.name, position=len([v for v in verdicts if v.would_try]) + 1, check=None, reason=reason)
        )
    verdicts += [
        Verdict(route=c.name, position=None, check=skips[c.name].check, reason=skips[c.name].reason)
        for c in candidates
        if c.name in skips
    ]
    return Explanation(group, needs, tuple(verdicts))
