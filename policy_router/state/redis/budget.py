"""The budget in Redis: one Lua script per write, keyed by the reservation's id.

A budget's keys: KEYS[1] its account (a hash of spent, reserved, calls, ...), KEYS[2] its
holds (reservation id -> amount), KEYS[3] the id's "done" marker, which outlives the hold by
`DONE_TTL` seconds so that a write repeated after a lost reply changes nothing. Each
function returns the `eval` arguments (or the write) for one operation; `RedisStore` sends
them on its sync or async client.
"""

from __future__ import annotations

from typing import Any

from ..store import SpendState
from .health import DONE_TTL
from .link import Write

__all__ = [
    "RESERVE_FN",
    "SETTLE_FN",
    "STATE_FN",
    "decode",
    "keys",
    "release",
    "reserve",
    "settle",
    "spend_state",
]


# Checks the cap and holds the amount under the id, in one step; an id already held is
# held, and an id already settled or released is refused (its reserve arrived late).
RESERVE_FN = """
local function reserve(account, holds, done, hold, amount, cap)
  if redis.call('HEXISTS', holds, hold) == 1 then return 1 end
  if redis.call('EXISTS', done) == 1 then return 0 end
  local v = redis.call('HMGET', account, 'spent', 'reserved')
  if cap ~= '' and tonumber(v[1] or '0') + tonumber(v[2] or '0') + amount > tonumber(cap) then
    return 0
  end
  redis.call('HSET', holds, hold, amount)
  redis.call('HINCRBY', account, 'reserved', amount)
  return 1
end
"""

# Replaces the hold by the call's cost and counts the call, once per id. An id never held
# (an unpriced call, or a hold dropped by drop_reservations) is counted with nothing to free.
SETTLE_FN = """
local function settle(account, holds, done, hold, cost, unmeasured, unbounded, ttl)
  if redis.call('EXISTS', done) == 1 then return 0 end
  redis.call('SET', done, '1', 'EX', ttl)
  local held = redis.call('HGET', holds, hold)
  if held then
    redis.call('HDEL', holds, hold)
    redis.call('HINCRBY', account, 'reserved', -tonumber(held))
  end
  redis.call('HINCRBY', account, 'spent', cost)
  redis.call('HINCRBY', account, 'calls', 1)
  if unmeasured == '1' then redis.call('HINCRBY', account, 'unmeasured', 1) end
  if unbounded == '1' then redis.call('HINCRBY', account, 'unbounded', 1) end
  return 1
end
"""

# Gives the hold back, once; marks the id done even when it is not held yet, so a reserve
# still on its way (sent before its reply was lost) is refused when it arrives.
_RELEASE = """-- policy_router: release
redis.call('SET', KEYS[3], '1', 'EX', ARGV[2])
local held = redis.call('HGET', KEYS[2], ARGV[1])
if held then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HINCRBY', KEYS[1], 'reserved', -tonumber(held))
end
return 1
"""

STATE_FN = """
local function spend_state(account, holds)
  local v = redis.call('HMGET', account, 'spent', 'reserved', 'calls', 'unmeasured', 'unbounded')
  table.insert(v, redis.call('HLEN', holds))
  return v
end
"""

_RESERVE = (
    "-- policy_router: reserve\n"
    + RESERVE_FN
    + "return reserve(KEYS[1], KEYS[2], KEYS[3], ARGV[1], tonumber(ARGV[2]), ARGV[3])\n"
)
_SETTLE = (
    "-- policy_router: settle\n"
    + SETTLE_FN
    + "return settle(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])\n"
)
_SPEND_STATE = "-- policy_router: spend state\n" + STATE_FN + "return spend_state(KEYS[1], KEYS[2])\n"


def decode(values: list[Any]) -> SpendState:
    """The budget's state from `spend_state`'s reply."""
    return SpendState.of_counts(int(v or 0) for v in values)


def keys(key: str, hold: str) -> tuple[str, str, str]:
    """A budget's account, its holds, and the "done" marker of the reservation `hold`."""
    return key, f"{key}:holds", f"{key}:done:{hold}"


def _keys(key: str, hold: str) -> tuple[Any, ...]:
    return (3, *keys(key, hold))


def reserve(key: str, hold: str, amount: int, cap: int | None) -> tuple[Any, ...]:
    """Hold `amount` under `hold` if it fits under `cap` (None: no cap)."""
    cap_arg = "" if cap is None else str(cap)
    return (_RESERVE, *_keys(key, hold), hold, amount, cap_arg)


def settle(key: str, hold: str, cost: int, measured: bool, bounded: bool) -> Write:
    """Replace the hold by the call's cost, once."""
    args = (hold, cost, int(not measured), int(not bounded), DONE_TTL)
    return [("eval", (_SETTLE, *_keys(key, hold), *args))]


def release(key: str, hold: str) -> Write:
    """Give the hold back, once."""
    return [("eval", (_RELEASE, *_keys(key, hold), hold, DONE_TTL))]


def spend_state(key: str) -> tuple[Any, ...]:
    """Read the budget's account and the number of holds."""
    return (_SPEND_STATE, 2, key, f"{key}:holds")
