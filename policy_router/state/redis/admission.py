"""An attempt's admission and its settlement in Redis: one script, one round trip, each.

`admit_args` are the eval of an admission, which reads the route's health record and, only while it is closed, takes the rate slot
and reserves the budget's worst case, in one script: a full window holds nothing, and a
refused reservation gives its slot back in the same script and returns the budget's state
for the reason. A record that is not closed is returned untouched, for the breaker's own
steps (`health.py`). `conclude_args` are the eval that settles the reservation, finishes the slot, and reads the
health record with whether the success was already written, in one script; only a record
the success changes (a route that had failed) takes a second round trip, the versioned
health write of `health.py`.

The scripts are the single-operation scripts' own functions (`budget.py`, `limits.py`), so
every write keeps its id and applies once: a script repeated after a lost reply changes
nothing. Every key lives under the store's key prefix, hash-tagged on a Redis Cluster, so
each script's keys share one slot.
"""

from __future__ import annotations

from typing import Any

from ...ground.clock import Clock
from ..admission import Admission, Admitting, Settlement
from ..windows import WINDOW
from . import budget as budget_script
from .health import DONE_TTL, Keys, decode
from .limits import FINISH_FN, NOW, TAKE_FN, finish_write
from .limits import decode as decode_window
from .limits import keys as window_keys
from .link import Write

__all__ = ["admit_args", "admitted", "changes", "conclude_args", "writes"]

# KEYS: 1 health record; 2-6 the route's window (slots, tokens, flying, closed, slot done);
# 7.. the budget accounts, three keys each (account, holds, hold done). ARGV: 1 take
# ('1'/''), 2 slot, 3 tokens, 4 rpm, 5 tpm, 6 window; 7 budget ('reserve', 'read' or ''),
# 8 hold, 9 amount, 10 how many accounts, 11 done ttl, 12.. their caps. Reply: seconds,
# micros, record, went on, window, reserved, the refusing (or first) account's state, which.
_ADMIT = (
    "-- policy_router: admit\n"
    + NOW
    + TAKE_FN
    + FINISH_FN
    + budget_script.RESERVE_ALL_FN
    + budget_script.STATE_FN
    + """
local record = redis.call('HGETALL', KEYS[1])
for i = 1, #record, 2 do
  if record[i] == 'state' and record[i + 1] ~= 'closed' then return {t[1], t[2], record, 0} end
end
local window = {}
if ARGV[1] == '1' then
  window = take(KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[2], tonumber(ARGV[3]),
                ARGV[4], ARGV[5], tonumber(ARGV[6]))
  if window[1] == 0 then return {t[1], t[2], record, 1, window} end
end
local refused = 1
if ARGV[7] == 'reserve' then
  local caps = {}
  for i = 12, #ARGV do caps[i - 11] = ARGV[i] end
  refused = reserve_all(7, tonumber(ARGV[10]), ARGV[8], tonumber(ARGV[9]), caps)
  if refused == 0 then return {t[1], t[2], record, 1, window, 1} end
  if ARGV[1] == '1' then finish(KEYS[2], KEYS[3], KEYS[4], KEYS[6], ARGV[2], '', ARGV[11]) end
end
if ARGV[7] ~= '' then
  local k = 7 + 3 * (refused - 1)
  return {t[1], t[2], record, 1, window, 0, spend_state(KEYS[k], KEYS[k + 1]), refused}
end
return {t[1], t[2], record, 1, window}
"""
)

# KEYS: 1 health record, 2 its write ids; 3-6 the slot (slots, tokens, flying, slot done);
# 7.. the budget accounts, three keys each. ARGV: 1 how many accounts to settle (0: none),
# 2 hold, 3 cost, 4 unmeasured, 5 unbounded, 6 done ttl; 7 finish ('1'/''), 8 slot,
# 9 billed; 10 read health ('1'/''), 11 the success's write id. Reply: {} or seconds,
# micros, record, applied.
_CONCLUDE = (
    "-- policy_router: conclude\n"
    + budget_script.SETTLE_ALL_FN
    + FINISH_FN
    + """
if ARGV[1] ~= '0' then
  settle_all(7, tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
end
if ARGV[7] == '1' then finish(KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[8], ARGV[9], ARGV[6]) end
if ARGV[10] ~= '1' then return {} end
local t = redis.call('TIME')
local applied = 0
if ARGV[11] ~= '' and redis.call('ZSCORE', KEYS[2], ARGV[11]) then applied = 1 end
return {t[1], t[2], redis.call('HGETALL', KEYS[1]), applied}
"""
)


def _accounts(space: str, names: list[str], hold: str) -> list[str]:
    return [k for name in names for k in budget_script.keys(f"{space}:budget:{name}", hold)]


def admit_args(space: str, ask: Admission) -> tuple[Any, ...]:
    """The eval of `ask` under the key prefix `space`."""
    tokens, rpm, tpm = ask.take if ask.take is not None else (0, None, None)
    mode = "" if not ask.budgets else "reserve" if ask.amount else "read"
    accounts = _accounts(space, [name for name, _ in ask.budgets], ask.hold)
    return (
        _ADMIT,
        6 + len(accounts),
        Keys(space, ask.route).record,
        *window_keys(space, ask.route, ask.token),
        *accounts,
        "1" if ask.take is not None else "",
        ask.token,
        tokens,
        "" if rpm is None else rpm,
        "" if tpm is None else tpm,
        WINDOW,
        mode,
        ask.hold,
        ask.amount,
        len(ask.budgets),
        DONE_TTL,
        *("" if cap is None else cap for _, cap in ask.budgets),
    )


def admitted(reply: list[Any], clock: Clock, probe_lease: float) -> Admitting:
    """An admission's reply, the record on the router's clock."""
    seconds, micros, flat, went_on, *rest = reply
    health = decode(seconds, micros, flat, clock, probe_lease)[0]
    if not int(went_on):
        return Admitting(health=health, went_on=False)
    return Admitting(
        health=health,
        window=decode_window(rest[0]) if rest and rest[0] else None,
        reserved=len(rest) > 1 and int(rest[1]) == 1,
        spend=budget_script.decode(rest[2]) if len(rest) > 2 else None,
        refused=int(rest[3]) - 1 if len(rest) > 3 else 0,
    )


def conclude_args(space: str, done: Settlement) -> tuple[Any, ...]:
    """The eval of `done` under the key prefix `space`."""
    health = Keys(space, done.route).record
    slots, tokens, flying, _, slot_done = window_keys(space, done.route, done.token)
    accounts = _accounts(space, list(done.budgets), done.hold)
    return (
        _CONCLUDE,
        6 + len(accounts),
        health,
        f"{health}:ops",
        slots,
        tokens,
        flying,
        slot_done,
        *accounts,
        len(done.budgets),
        done.hold,
        done.cost,
        int(not done.measured),
        int(not done.bounded),
        DONE_TTL,
        "1" if done.slot else "",
        done.token,
        "" if done.tokens is None else done.tokens,
        "1" if done.change is not None else "",
        done.op,
    )


def changes(done: Settlement, reply: list[Any], clock: Clock, probe_lease: float) -> bool:
    """Whether the success changes the record the settlement read: a route that had
    failed, whose record the versioned health write then changes (a second round trip)."""
    if done.change is None or not reply or int(reply[3]) == 1:
        return False
    old = decode(reply[0], reply[1], reply[2], clock, probe_lease)[0]
    return done.change(old) != old


def writes(space: str, done: Settlement) -> list[Write]:
    """The budget and slot writes of a settlement, as the backlog keeps them."""
    out: list[Write] = []
    if done.budgets:
        keys = [f"{space}:budget:{name}" for name in done.budgets]
        out.append(budget_script.settle(keys, done.hold, done.cost, done.measured, done.bounded))
    if done.slot:
        out.append(finish_write(space, done.route, done.token, done.tokens, DONE_TTL))
    return out
