"""The budget in Redis: one Lua script per write, keyed by the reservation's id.

A budget's keys: KEYS[1] its account (a hash of spent, reserved, calls, ...), KEYS[2] its
holds (reservation id -> amount), KEYS[3] the id's "done" marker, which outlives the hold by
`DONE_TTL` seconds so that a write repeated after a lost reply changes nothing. Each
function returns the `eval` arguments (or the write) for one operation; `RedisStore` sends
them on its sync or async client.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..store import SpendState
from .health import DONE_TTL
from .link import Write

__all__ = [
    "RESERVE_ALL_FN",
    "RESERVE_FN",
    "SETTLE_ALL_FN",
    "SETTLE_FN",
    "STATE_FN",
    "decode",
    "keys",
    "release",
    "reserve_all",
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
for k = 1, #KEYS, 3 do
  redis.call('SET', KEYS[k + 2], '1', 'EX', ARGV[2])
  local held = redis.call('HGET', KEYS[k + 1], ARGV[1])
  if held then
    redis.call('HDEL', KEYS[k + 1], ARGV[1])
    redis.call('HINCRBY', KEYS[k], 'reserved', -tonumber(held))
  end
end
return 1
"""

# The same, over n accounts at once: KEYS[first], KEYS[first + 1], KEYS[first + 2] are the
# first account's (account, holds, done), and so on; `caps` their caps. Every account is
# checked before any is held, so the hold is taken in all of them or in none. Returns 0
# when held in all, else the (1-based) number of the account that refused.
RESERVE_ALL_FN = """
local function reserve_all(first, n, hold, amount, caps)
  for i = 0, n - 1 do
    local k = first + 3 * i
    if redis.call('HEXISTS', KEYS[k + 1], hold) == 0 then
      if redis.call('EXISTS', KEYS[k + 2]) == 1 then return i + 1 end
      local cap = caps[i + 1]
      if cap ~= '' then
        local v = redis.call('HMGET', KEYS[k], 'spent', 'reserved')
        if tonumber(v[1] or '0') + tonumber(v[2] or '0') + amount > tonumber(cap) then
          return i + 1
        end
      end
    end
  end
  for i = 0, n - 1 do
    local k = first + 3 * i
    if redis.call('HEXISTS', KEYS[k + 1], hold) == 0 then
      redis.call('HSET', KEYS[k + 1], hold, amount)
      redis.call('HINCRBY', KEYS[k], 'reserved', amount)
    end
  end
  return 0
end
"""

SETTLE_ALL_FN = SETTLE_FN + """
local function settle_all(first, n, hold, cost, unmeasured, unbounded, ttl)
  for i = 0, n - 1 do
    local k = first + 3 * i
    settle(KEYS[k], KEYS[k + 1], KEYS[k + 2], hold, cost, unmeasured, unbounded, ttl)
  end
end
"""

STATE_FN = """
local function spend_state(account, holds)
  local v = redis.call('HMGET', account, 'spent', 'reserved', 'calls', 'unmeasured', 'unbounded')
  table.insert(v, redis.call('HLEN', holds))
  return v
end
"""

# ARGV: 1 hold, 2 amount, 3.. the caps ('' for none).
_RESERVE = (
    "-- policy_router: reserve\n"
    + RESERVE_ALL_FN
    + "local caps = {}\nfor i = 3, #ARGV do caps[i - 2] = ARGV[i] end\n"
    + "return reserve_all(1, #KEYS / 3, ARGV[1], tonumber(ARGV[2]), caps)\n"
)
_SETTLE = (
    "-- policy_router: settle\n"
    + SETTLE_ALL_FN
    + "settle_all(1, #KEYS / 3, ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])\nreturn 1\n"
)
_SPEND_STATE = "-- policy_router: spend state\n" + STATE_FN + "return spend_state(KEYS[1], KEYS[2])\n"


def decode(values: list[Any]) -> SpendState:
    """The budget's state from `spend_state`'s reply."""
    return SpendState.of_counts(int(v or 0) for v in values)


def keys(key: str, hold: str) -> tuple[str, str, str]:
    """A budget's account, its holds, and the "done" marker of the reservation `hold`."""
    return key, f"{key}:holds", f"{key}:done:{hold}"


def _keys(names: Sequence[str], hold: str) -> tuple[Any, ...]:
    found = [k for name in names for k in keys(name, hold)]
    return (len(found), *found)


def reserve_all(accounts: Sequence[tuple[str, int | None]], hold: str, amount: int) -> tuple[Any, ...]:
    """Hold `amount` under `hold` in every (key, cap) of `accounts`, or in none; the reply is
    0, or the 1-based number of the account that refused."""
    caps = ["" if cap is None else str(cap) for _, cap in accounts]
    return (_RESERVE, *_keys([k for k, _ in accounts], hold), hold, amount, *caps)


def settle(key: str | Sequence[str], hold: str, cost: int, measured: bool, bounded: bool) -> Write:
    """Replace the hold by the call's cost in each account, once."""
    args = (hold, cost, int(not measured), int(not bounded), DONE_TTL)
    return [("eval", (_SETTLE, *_keys([key] if isinstance(key, str) else key, hold), *args))]


def release(key: str | Sequence[str], hold: str) -> Write:
    """Give the hold back in each account, once."""
    return [("eval", (_RELEASE, *_keys([key] if isinstance(key, str) else key, hold), hold, DONE_TTL))]


def spend_state(key: str) -> tuple[Any, ...]:
    """Read the budget's account and the number of holds."""
    return (_SPEND_STATE, 2, key, f"{key}:holds")
