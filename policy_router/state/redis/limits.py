"""Rate windows in Redis: one script per check-and-take, times on the server's clock.

A route's window is a sorted set of slot ids scored by the server time they were taken,
with a hash of their tokens; a sorted set of the slots in flight; a key holding when a
provider's 429 closed the window until. `take` prunes, checks and takes in one script, so
processes on any number of machines share one window and cannot pass a limit together.
`finish` and `close_window` are idempotent writes (a slot's "done" marker), safe to replay.
Floats go back to Python as strings: a Lua number in a Redis reply is cut to an integer.
"""

from __future__ import annotations

from typing import Any

from ..windows import WINDOW, Window

__all__ = [
    "FINISH_FN",
    "NOW",
    "TAKE_FN",
    "close_args",
    "decode",
    "decode_all",
    "finish_write",
    "keys",
    "take_args",
    "windows_args",
]

NOW = "local t = redis.call('TIME')\nlocal now = tonumber(t[1]) + tonumber(t[2]) / 1e6\n"

# Prunes the window and reads it; shared by take and windows. KEYS slots, tokens, flying,
# closed; `window` the slot lifetime. Sets requests, used, flying, frees, closed.
_READ = """
local old = redis.call('ZRANGEBYSCORE', K1, '-inf', now - window)
for _, s in ipairs(old) do redis.call('HDEL', K2, s) end
redis.call('ZREMRANGEBYSCORE', K1, '-inf', now - window)
redis.call('ZREMRANGEBYSCORE', K3, '-inf', now - 600)
local requests = redis.call('ZCARD', K1)
local used = 0
for _, v in ipairs(redis.call('HVALS', K2)) do used = used + tonumber(v) end
local flying = redis.call('ZCARD', K3)
local closed = tonumber(redis.call('GET', K4) or '0') - now
if closed < 0 then closed = 0 end
local frees = 0
local oldest = redis.call('ZRANGE', K1, 0, 0, 'WITHSCORES')
if #oldest > 0 then frees = tonumber(oldest[2]) + window - now end
if frees < 0 then frees = 0 end
"""

# Takes slot `slot` of `need` tokens if the window has room; a slot already taken, or
# already finished (K5, its "done" marker), counts as taken. Needs `now`.
TAKE_FN = (
    "local function take(K1, K2, K3, K4, K5, slot, need, rpm, tpm, window)\n"
    + _READ
    + """
  local function reply(taken)
    return {taken, requests, tostring(used), flying, tostring(frees), tostring(closed)}
  end
  if redis.call('ZSCORE', K1, slot) or redis.call('EXISTS', K5) == 1 then
    return reply(1)
  end
  local rpm_full = rpm ~= '' and requests + 1 > tonumber(rpm)
  local tpm_full = tpm ~= '' and used + need > tonumber(tpm)
  if closed > 0 or rpm_full or tpm_full then
    if tpm_full and not rpm_full then
      local limit = tonumber(tpm)
      if need > limit then
        frees = -1
      else
        local over = used + need - limit
        local slots = redis.call('ZRANGE', K1, 0, -1, 'WITHSCORES')
        for i = 1, #slots, 2 do
          over = over - tonumber(redis.call('HGET', K2, slots[i]) or '0')
          if over <= 0 then frees = tonumber(slots[i + 1]) + window - now; break end
        end
      end
    end
    return reply(0)
  end
  redis.call('ZADD', K1, now, slot)
  redis.call('HSET', K2, slot, need)
  redis.call('ZADD', K3, now, slot)
  for _, k in ipairs({K1, K2}) do redis.call('EXPIRE', k, math.ceil(window) + 1) end
  redis.call('EXPIRE', K3, 600)
  requests, used, flying = requests + 1, used + need, flying + 1
  return reply(1)
end
"""
)

_TAKE = (
    "-- policy_router: take a rate slot\n"
    + NOW
    + TAKE_FN
    + "return take(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], tonumber(ARGV[2]), "
    + "ARGV[3], ARGV[4], tonumber(ARGV[5]))\n"
)

# Settles a slot to its billed tokens, or gives it back (billed == ''), once per slot.
FINISH_FN = """
local function finish(K1, K2, K3, K4, slot, billed, ttl)
  if redis.call('EXISTS', K4) == 1 then return 0 end
  redis.call('SET', K4, '1', 'EX', ttl)
  redis.call('ZREM', K3, slot)
  if billed == '' then
    redis.call('ZREM', K1, slot)
    redis.call('HDEL', K2, slot)
  elseif redis.call('ZSCORE', K1, slot) then
    redis.call('HSET', K2, slot, billed)
  end
  return 1
end
"""

_FINISH = (
    "-- policy_router: finish a rate slot\n"
    + FINISH_FN
    + "return finish(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3])\n"
)

_CLOSE = (
    "-- policy_router: close a rate window\n"
    + NOW
    + """
local till = now + tonumber(ARGV[1])
if till > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], tostring(till), 'PX', math.ceil(tonumber(ARGV[1]) * 1000) + 1000)
end
return 1
"""
)

# Every named route's window; its keys are built from ARGV, all in the namespace's slot.
_WINDOWS = (
    "-- policy_router: rate windows\n"
    + NOW
    + "local window = tonumber(ARGV[2])\nlocal out = {}\n"
    + "for i = 3, #ARGV do\n"
    + "  local base = ARGV[1] .. ARGV[i]\n"
    + "  local K1, K2, K3, K4 = base .. ':slots', base .. ':tokens', base .. ':flying', base .. ':closed'\n"
    + _READ
    + "  table.insert(out, {requests, tostring(used), flying, tostring(frees), tostring(closed)})\n"
    + "end\nreturn out\n"
)


def keys(namespace: str, route: str, slot: str) -> tuple[str, str, str, str, str]:
    """A route's window keys (slots, tokens, flying, closed) and slot `slot`'s "done"."""
    return (*_keys(namespace, route), f"{namespace}:rate:{route}:done:{slot}")


def _keys(namespace: str, route: str) -> tuple[str, str, str, str]:
    base = f"{namespace}:rate:{route}"
    return f"{base}:slots", f"{base}:tokens", f"{base}:flying", f"{base}:closed"


def take_args(
    namespace: str, route: str, slot: str, tokens: int, rpm: int | None, tpm: int | None
) -> tuple[Any, ...]:
    done = f"{namespace}:rate:{route}:done:{slot}"
    limit = ("" if rpm is None else rpm, "" if tpm is None else tpm)
    return (_TAKE, 5, *_keys(namespace, route), done, slot, tokens, *limit, WINDOW)


def finish_write(
    namespace: str, route: str, slot: str, tokens: int | None, ttl: int
) -> list[tuple[str, tuple[Any, ...]]]:
    slots, token_key, flying, _ = _keys(namespace, route)
    done = f"{namespace}:rate:{route}:done:{slot}"
    billed = "" if tokens is None else tokens
    return [("eval", (_FINISH, 4, slots, token_key, flying, done, slot, billed, ttl))]


def close_args(namespace: str, route: str, seconds: float) -> list[tuple[str, tuple[Any, ...]]]:
    return [("eval", (_CLOSE, 1, _keys(namespace, route)[3], repr(float(seconds))))]


def windows_args(namespace: str, routes: list[str]) -> tuple[Any, ...]:
    # One key declared (unused) so that a cluster sends it to the namespace's slot.
    return (_WINDOWS, 1, f"{namespace}:routes", f"{namespace}:rate:", WINDOW, *routes)


def decode(reply: list[Any], taken: bool | None = None) -> Window:
    """A reply as a `Window` (`frees_in` of -1 in the script means never)."""
    head = int(reply[0]) == 1 if taken is None else taken
    values = reply[1:] if taken is None else reply
    requests, used, flying, frees, closed = values
    frees_in = float("inf") if float(frees) < 0 else float(frees)
    return Window(requests=int(requests), tokens=int(float(used)), in_flight=int(flying), frees_in=frees_in, closed_for=float(closed), taken=head)


def decode_all(routes: list[str], reply: list[Any]) -> dict[str, Window]:
    return {r: decode(v, taken=True) for r, v in zip(routes, reply, strict=True)}
