"""The express lane's budget: the call's worst case held before the lane sends it.

A budgeted call on the lane is admitted as the plan's gate admits its first route: the
call's ledger (its user, tags and scope) and its measured bounds, then one store operation
(`Gate.admit_closed`, the same `Store.admit` the plan's gate makes) that reads the route's
record and reserves the worst case against every account the call falls under, all or
none. The attempt's checkpoint holds the body as LiteLLM builds it to that reservation.
An answer is settled in one operation too (`Gate.conclude`: the charge, the breaker's
success), and the attempt records what the budget charged.

Anything else is the plan's, which then asks the store itself: a refusal (the plan asks
again and says why in the journey; nothing was held), a record that is not closed, a store
that cannot admit in one operation. An attempt the lane sent and did not keep (a failure,
a cancellation, an answer LiteLLM made itself) is adopted by the plan with its hold, which
the plan settles or releases as it does its own attempts'.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.checkpoint import Checkpoint, judge_for
from ..core.gate import Admitted, Gate
from ..policies.budget import RequestFacts, Reservation
from ..state.store import perform

if TYPE_CHECKING:
    from ..endpoints import Endpoint
    from ..policies.breaker import HealthBook
    from ..policies.candidate import Candidate
    from ..policies.scopes import Budgets, CallScope
    from ..state.store import Store
    from .prompt import Prompt

__all__ = ["Hold", "hold"]

Facts = Callable[..., RequestFacts | None]
"""`Planner.facts`: a call's bounds, measured once."""


class Hold:
    """What the lane holds for one budgeted attempt: its gate, its reservation (None when
    no account covers the route), and the checkpoint its wire judges the body with."""

    __slots__ = ("gate", "held", "judge")

    def __init__(self, gate: Gate, held: Reservation | None, judge: Checkpoint | None) -> None:
        self.gate, self.held, self.judge = gate, held, judge


def hold(
    budgets: Budgets,
    facts_of: Facts,
    book: HealthBook | None,
    store: Store,
    candidate: Candidate,
    endpoint: Endpoint,
    group: str,
    call_kwargs: dict[str, Any],
    scope: CallScope | None,
    prompt: Prompt | None,
    token: str,
    at: float,
    floor: bool,
) -> Hold | bool:
    """Admit `candidate` for a call on the lane (its kwargs for LiteLLM, its `scope=`, its
    prompt when measured already), as attempt `token` at `at`: its `Hold`; True when no
    budget covers the call (the lane goes on as without one); False when the plan must
    decide, with nothing held."""
    ledger = budgets.for_call(call_kwargs, scope)
    if ledger is None:
        return True
    facts = facts_of(endpoint, group, call_kwargs, prompt=prompt)
    gate = Gate(book, None, ledger, facts, store)
    admitted = perform(store, gate.admit_closed(candidate, at, token))
    if not isinstance(admitted, Admitted):
        return False  # refused, or the breaker's own steps to take: the plan's to say
    held = admitted.held
    return Hold(gate, held, judge_for(candidate, held, floor, ledger, facts))
