"""Route health in Redis: records on the server's clock, written once per write id.

A route's record is a hash whose times are on the *server's* clock (`TIME`, read in the
same script as the record), converted to the router's own clock on the way in and out, so
the breaker's pure transitions run unchanged. A change is made optimistically: read the
record with its version, apply the breaker's transition here, and write it with one Lua
script that succeeds only if the version is unchanged (else read and apply again). The
write script also records the write's id (`op`): a write repeated after a lost reply is
found applied and changes nothing, so a failure is never counted twice.

A probe is owned: the attempt that claims it is recorded (`probe_by`, its token). When an
attempt's claim or outcome could not be confirmed, `free_probe(token)` gives the probe
back, once Redis is reached, if that attempt still holds it; it also marks the token done,
so a claim of that attempt arriving late is refused rather than left holding the probe.

The update is written once, as a generator of Redis evals (`Update.steps`); `run` and
`arun` drive it on the sync and async clients.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from ...ground.clock import Clock
from ..store import Health

__all__ = ["ALL", "DONE_TTL", "Update", "arun", "decode_all", "free_probe", "run"]

DONE_TTL = 86400
"""Seconds a write id or a finished token is remembered: longer than any reply in flight."""

# The record, the server's clock, its version, whether `op` was applied, and whether the
# token is done, in one round trip. KEYS: record, ops, token done. ARGV: op.
_READ = """-- policy_router: health read
local t = redis.call('TIME')
local applied = 0
if ARGV[1] ~= '' and redis.call('ZSCORE', KEYS[2], ARGV[1]) then applied = 1 end
return {t[1], t[2], redis.call('HGETALL', KEYS[1]), applied, redis.call('EXISTS', KEYS[3])}
"""

# Writes the record if its version is still ARGV[1]: 1 written, 0 changed meanwhile,
# 2 this op was applied already, 3 a late claim by a finished token.
# KEYS: record, ops, index, token done. ARGV: version, op, route, token, claim, ttl,
# then the fields (none: delete the record).
_WRITE = """-- policy_router: health write
if ARGV[2] ~= '' and redis.call('ZSCORE', KEYS[2], ARGV[2]) then return 2 end
if (redis.call('HGET', KEYS[1], 'v') or '0') ~= ARGV[1] then return 0 end
if ARGV[5] == '1' and redis.call('EXISTS', KEYS[4]) == 1 then return 3 end
local t = redis.call('TIME')
if ARGV[2] ~= '' then
  redis.call('ZADD', KEYS[2], t[1], ARGV[2])
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', tonumber(t[1]) - 3600)
  redis.call('EXPIRE', KEYS[2], 3600)
end
if #ARGV == 6 then
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[3], ARGV[3])
  return 1
end
redis.call('HSET', KEYS[1], 'v', tonumber(ARGV[1]) + 1, unpack(ARGV, 7))
if ARGV[5] == '1' then
  redis.call('HSET', KEYS[1], 'probe_by', ARGV[4], 'probe_at', string.format('%d.%06d', t[1], t[2]))
end
redis.call('EXPIRE', KEYS[1], ARGV[6])
redis.call('SADD', KEYS[3], ARGV[3])
return 1
"""

# Gives back the probe `token` holds, if it still does, and marks the token done.
# KEYS: record, token done. ARGV: token, ttl.
_FREE_PROBE = """-- policy_router: free probe
redis.call('SET', KEYS[2], '1', 'EX', ARGV[2])
if redis.call('HGET', KEYS[1], 'probe_by') == ARGV[1] and redis.call('HGET', KEYS[1], 'probing') == '1' then
  redis.call('HSET', KEYS[1], 'probing', 0)
  redis.call('HINCRBY', KEYS[1], 'v', 1)
end
return 1
"""

# Every route's record and the server's clock in one round trip; expired routes leave
# the index. Records are named from ARGV, all in the index's slot (one hash tag).
ALL = """-- policy_router: all health
local t = redis.call('TIME')
local out = {t[1], t[2]}
for _, name in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local record = redis.call('HGETALL', ARGV[1] .. name)
  if #record == 0 then
    redis.call('SREM', KEYS[1], name)
  else
    table.insert(out, name)
    table.insert(out, record)
  end
end
return out
"""

# One eval: the script and its arguments (numkeys, keys..., args...).
Eval = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Keys:
    """Where one route's health lives under a namespace."""

    namespace: str
    route: str

    @property
    def record(self) -> str:
        return f"{self.namespace}:health:{self.route}"

    @property
    def index(self) -> str:
        return f"{self.namespace}:routes"

    def done(self, token: str) -> str:
        return f"{self.namespace}:token-done:{token}"


@dataclass(kw_only=True, frozen=True, slots=True)
class Read:
    """A decoded read: the record on the router's clock, and what the write needs."""

    health: Health
    offset: float
    server_now: float
    version: str
    applied: bool
    done: bool


def decode(
    seconds: Any, micros: Any, flat: list[Any], clock: Clock, probe_lease: float
) -> tuple[Health, float, float, str]:
    """A record as a `Health` on the router's clock, the clock offset, the server's time,
    and the record's version."""
    server_now = int(seconds) + int(micros) / 1e6
    offset = clock.now() - server_now
    f = dict(zip(flat[::2], flat[1::2], strict=True))
    if not f:
        return Health(), offset, server_now, "0"
    rest_until = float(f.get("rest_until", 0.0))
    probing = f.get("probing") == "1"
    if probing and server_now - float(f.get("probe_at", 0.0)) > probe_lease:
        probing = False  # its prober never reported back
    health = Health(
        state=f.get("state", "closed"),
        failures=int(f.get("failures", 0)),
        rest_until=rest_until + offset if rest_until else 0.0,
        rest=float(f.get("rest", 0.0)),
        probing=probing,
        last_error=f.get("last_error", ""),
        opened=int(f.get("opened", 0)),
    )
    return health, offset, server_now, str(f.get("v", "0"))


def decode_all(reply: list[Any], clock: Clock, probe_lease: float) -> dict[str, Health]:
    """An `ALL` reply as every route's record."""
    seconds, micros, *pairs = reply
    return {
        name: decode(seconds, micros, flat, clock, probe_lease)[0]
        for name, flat in zip(pairs[::2], pairs[1::2], strict=True)
    }


def free_probe(keys: Keys, token: str) -> list[tuple[str, tuple[Any, ...]]]:
    """The write that gives back the probe `token` may hold (see the module docstring)."""
    return [("eval", (_FREE_PROBE, 2, keys.record, keys.done(token), token, DONE_TTL))]


class Update:
    """One change of one route's record, as the evals it takes (see the module docstring).

    `claimed` turns True once a write that claims the probe was sent: if its outcome is
    then unknown, the caller gives the probe back with `free_probe`.
    """

    def __init__(
        self,
        keys: Keys,
        change: Callable[[Health], Health],
        *,
        token: str,
        op: str,
        clock: Clock,
        probe_lease: float,
        keep: int,
    ) -> None:
        self.keys = keys
        self.change = change
        self.token = token
        self.op = op
        self.clock = clock
        self.probe_lease = probe_lease
        self.keep = keep
        self.claimed = False

    def _read(self, reply: list[Any]) -> Read:
        seconds, micros, flat, applied, done = reply
        health, offset, server_now, version = decode(
            seconds, micros, flat, self.clock, self.probe_lease
        )
        return Read(health=health, offset=offset, server_now=server_now, version=version, applied=applied == 1, done=done == 1)

    def steps(self) -> Generator[Eval, Any, Health]:
        """Read, apply, write if the version held; again when another process wrote first.
        Most updates change nothing (a closed route admitted, a healthy one answering) and
        end after one read."""
        k = self.keys
        for _ in range(16):
            read = self._read((yield (_READ, 3, k.record, f"{k.record}:ops", k.done(self.token), self.op)))
            old = read.health
            if read.applied:
                return old
            new = self.change(old)
            if new == old:
                return new
            claim = new.probing and not old.probing
            if claim and read.done:
                return old
            self.claimed = self.claimed or claim
            written = yield self._write(read, new, claim)
            if written in (1, 3):
                return new if written == 1 else old
        # Sixteen processes wrote first in a row: the record as last read stands.
        return old

    def _write(self, read: Read, new: Health, claim: bool) -> Eval:
        k = self.keys
        head = (
            _WRITE,
            4,
            k.record,
            f"{k.record}:ops",
            k.index,
            k.done(self.token),
            read.version,
            self.op,
            k.route,
            self.token,
            int(claim),
        )
        if new == Health():
            return (*head, 0)
        rest_until = new.rest_until - read.offset if new.rest_until else 0.0
        ttl = int(max(rest_until - read.server_now, 0.0)) + self.keep
        fields = {
            "state": new.state,
            "failures": new.failures,
            "rest_until": repr(rest_until),
            "rest": repr(new.rest),
            "probing": int(new.probing),
            "last_error": new.last_error,
            "opened": new.opened,
        }
        return (*head, ttl, *(x for pair in fields.items() for x in pair))


def run(client: Any, steps: Generator[Eval, Any, Health]) -> Health:
    """Drive an update's evals on a sync client."""
    reply: Any = None
    try:
        while True:
            reply = client.eval(*steps.send(reply))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def arun(client: Any, steps: Generator[Eval, Any, Health]) -> Health:
    """Drive an update's evals on an async client."""
    reply: Any = None
    try:
        while True:
            reply = await client.eval(*steps.send(reply))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
