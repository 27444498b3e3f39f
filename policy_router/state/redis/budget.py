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

__all__ = ["decode", "release", "reserve", "settle", "spend_state"]


# Checks the cap and holds the amount under the id, in one step; an id already held is
# held, and an id already settled or released is refused (its reserve arrived late).
_RESERVE = """-- policy_router: reserve
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 1 end
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
local v = redis.call('HMGET', KEYS[1], 'spent', 'reserved')
local amount = tonumber(ARGV[2])
if ARGV[3] ~= '' and tonumber(v[1] or '0') + tonumber(v[2] or '0') + amount > tonumber(ARGV[3]) then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], amount)
redis.call('HINCRBY', KEYS[1], 'reserved', amount)
return 1
"""



# Replaces the hold by the call's cost and counts the call, once per id. An id never held
# (an unpriced call, or a hold dropped by drop_reservations) is counted with nothing to free.
_SETTLE = """-- policy_router: settle
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
redis.call('SET', KEYS[3], '1', 'EX', ARGV[5])
local held = redis.call('HGET', KEYS[2], ARGV[1])
if held then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HINCRBY', KEYS[1], 'reserved', -tonumber(held))
end
redis.call('HINCRBY', KEYS[1], 'spent', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'calls', 1)
if ARGV[3] == '1' then redis.call('HINCRBY', KEYS[1], 'unmeasured', 1) end
if ARGV[4] == '1' then redis.call('HINCRBY', KEYS[1], 'unbounded', 1) end
return 1
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



_SPEND_STATE = """
local v = redis.call('HMGET', KEYS[1], 'spent', 'reserved', 'calls', 'unmeasured', 'unbounded')
table.insert(v, redis.call('HLEN', KEYS[2]))
return v
"""



def decode(values: list[Any]) -> SpendState:
    """The budget's state from `spend_state`'s reply."""
    return SpendState(*(int(v or 0) for v in values))


def _keys(key: str, hold: str) -> tuple[Any, ...]:
    return (3, key, f"{key}:holds", f"{key}:done:{hold}")


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
