"""An attempt's admission and its settlement, each asked of the store as one operation.

The gate (`core.gate`) asks `Store.admit(Admission)` before an attempt and
`Store.conclude(Settlement)` after an answer, where a store has them; a shared store makes
each one round trip (one script), a store in this process makes the same steps one after
another (`admit_in_turn`, `conclude_in_turn`). Every step keeps the promise of the method
it stands for: atomic, applied once by its id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .store import Health, SpendState

if TYPE_CHECKING:
    from .store import Store
    from .windows import Window

__all__ = ["Admission", "Admitting", "Settlement", "admit_in_turn", "conclude_in_turn"]


@dataclass(kw_only=True, frozen=True, slots=True)
class Admission:
    """One attempt's admission asked of the store as one operation (see `Store.admit`).

    `health`: read the route's record and go on only while it is closed (a closed route is
    admitted unchanged by the breaker; any other state is left to the breaker's own steps).
    `take`: (tokens, rpm, tpm) of a rate slot named `token`. `budgets`: reserve `amount`
    under `hold` in every one of these (account, cap) pairs at once, or in none; with
    `amount` 0, only read the first one's state.
    """

    route: str
    token: str
    health: bool = False
    take: tuple[int, int | None, int | None] | None = None
    budgets: tuple[tuple[str, int | None], ...] = ()
    hold: str = ""
    amount: int = 0


@dataclass(kw_only=True, frozen=True, slots=True)
class Admitting:
    """What `Store.admit` did. `went_on` is False when the route's record was not closed:
    then nothing was taken or held. `window` is the take's window (None when not asked or
    not reached); a full window holds nothing. `reserved` says the hold is held; `spend` is
    the state of the account that refused it, the `refused`-th (or of the first, only
    read), for the reason. A refused hold gives the slot back in the same operation."""

    health: Health
    went_on: bool = True
    window: Window | None = None
    reserved: bool = False
    spend: SpendState | None = None
    refused: int = 0


@dataclass(kw_only=True, frozen=True, slots=True)
class Settlement:
    """One answered attempt's settlement as one operation (see `Store.conclude`): the
    settle of its hold in each of `budgets` (its accounts), the rate slot's finish (when
    `slot`), and the health `change` (when given) written as `op` on behalf of `token`."""

    route: str
    token: str
    budgets: tuple[str, ...] = ()
    hold: str = ""
    cost: int = 0
    measured: bool = True
    bounded: bool = True
    slot: bool = False
    tokens: int | None = None
    change: Callable[[Health], Health] | None = None
    op: str = ""


def admit_in_turn(store: Store, ask: Admission) -> Admitting:
    """`Store.admit` made of the store's own atomic methods, one after another: for a store
    in this process, where a round trip costs nothing."""
    health = store.health(ask.route) if ask.health else Health()
    if health.state != "closed":
        return Admitting(health=health, went_on=False)
    window = None
    if ask.take is not None:
        tokens, rpm, tpm = ask.take
        window = store.take(ask.route, ask.token, tokens, rpm, tpm)
        if not window.taken:
            return Admitting(health=health, window=window)
    if not ask.budgets:
        return Admitting(health=health, window=window)
    refused = store.reserve_all(ask.budgets, ask.hold, ask.amount) if ask.amount else 0
    if refused < 0:
        return Admitting(health=health, window=window, reserved=True)
    if ask.amount and window is not None:
        store.finish(ask.route, ask.token, None)
    return Admitting(
        health=health, window=window, spend=store.spend_state(ask.budgets[refused][0]), refused=refused,
    )


def conclude_in_turn(store: Store, done: Settlement) -> None:
    """`Store.conclude` made of the store's own atomic methods, one after another."""
    if done.budgets:
        store.settle_all(done.budgets, done.hold, done.cost, measured=done.measured, bounded=done.bounded)
    if done.slot:
        store.finish(done.route, done.token, done.tokens)
    if done.change is not None:
        store.update_health(done.route, done.change, token=done.token, op=done.op)
