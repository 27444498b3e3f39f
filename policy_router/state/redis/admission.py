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
# 7-9 the budget (account, holds, hold done). ARGV: 1 take ('1'/''), 2 slot, 3 tokens,
# 4 rpm, 5 tpm, 6 window; 7 budget ('reserve', 'read' or ''), 8 hold, 9 amount, 10 cap,
# 11 done ttl. Reply: seconds, micros, record, went on, window, reserved, spend state.
_ADMIT = (
    "-- policy_router: admit\n"
    + NOW
    + TAKE_FN
    + FINISH_FN
    + budget_script.RESERVE_FN
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
if ARGV[7] == 'reserve' then
  if reserve(KEYS[7], KEYS[8], KEYS[9], ARGV[8], tonumber(ARGV[9]), ARGV[10]) == 1 then
    return {t[1], t[2], record, 1, window, 1}
  end
  if ARGV[1] == '1' then finish(KEYS[2], KEYS[3], KEYS[4], KEYS[6], ARGV[2], '', ARGV[11]) end
end
if ARGV[7] ~= '' then return {t[1], t[2], record, 1, window, 0, spend_state(KEYS[7], KEYS[8])} end
return {t[1], t[2], record, 1, window}
"""
)

# KEYS: 1 health record, 2 its write ids; 3-5 the budget (account, holds, hold done); 6-9
# the slot (slots, tokens, flying, slot done). ARGV: 1 settle ('1'/''), 2 hold, 3 cost,
# 4 unmeasured, 5 unbounded, 6 done ttl; 7 finish ('1'/''), 8 slot, 9 billed; 10 read
# health ('1'/''), 11 the success's write id. Reply: {} or seconds, micros, record, applied.
_CONCLUDE = (
    "-- policy_router: conclude\n"
    + budget_script.SETTLE_FN
    + FINISH_FN
    + """
if ARGV[1] == '1' then
  settle(KEYS[3], KEYS[4], KEYS[5], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
end
if ARGV[7] == '1' then finish(KEYS[6], KEYS[7], KEYS[8], KEYS[9], ARGV[8], ARGV[9], ARGV[6]) end
if ARGV[10] ~= '1' then return {} end
local t = redis.call('TIME')
local applied = 0
if ARGV[11] ~= '' and redis.call('ZSCORE', KEYS[2], ARGV[11]) then applied = 1 end
return {t[1], t[2], redis.call('HGETALL', KEYS[1]), applied}
"""
)




def admit_args(space: str, ask: Admission) -> tuple[Any, ...]:
    """The eval of `ask` under the key prefix `space`."""
    tokens, rpm, tpm = ask.take if ask.take is not None else (0, None, None)
    mode = "" if ask.budget is None else "reserve" if ask.amount else "read"
    return (
        _ADMIT,
        9,
        Keys(space, ask.route).record,
        *window_keys(space, ask.route, ask.token),
        *budget_script.keys(f"{space}:budget:{ask.budget or ''}", ask.hold),
        "1" if ask.take is not None else "",
        ask.token,
        tokens,
        "" if rpm is None else rpm,
        "" if tpm is None else tpm,
        WINDOW,
        mode,
        ask.hold,
        ask.amount,
        "" if ask.cap is None else ask.cap,
        DONE_TTL,
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
    )


def conclude_args(space: str, done: Settlement) -> tuple[Any, ...]:
    """The eval of `done` under the key prefix `space`."""
    health = Keys(space, done.route).record
    slots, tokens, flying, _, slot_done = window_keys(space, done.route, done.token)
    return (
        _CONCLUDE,
        9,
        health,
        f"{health}:ops",
        *budget_script.keys(f"{space}:budget:{done.budget or ''}", done.hold),
        slots,
        tokens,
        flying,
        slot_done,
        "1" if done.budget is not None else "",
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
    if done.budget is not None:
        key = f"{space}:budget:{done.budget}"
        out.append(budget_script.settle(key, done.hold, done.cost, done.measured, done.bounded))
    if done.slot:
        out.append(finish_write(space, done.route, done.token, done.tokens, DONE_TTL))
    return out
