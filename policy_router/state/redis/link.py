"""The connection to Redis behind RedisStore: two clients, the outage, the backlog.

`Link.run` (sync) and `Link.arun` (async) run one operation against Redis and turn a
refused, timed-out or unauthenticated connection into `StoreUnavailableError`, at once and
without waiting while Redis is known to be down; they tell the bound routers' observers
`StoreLost` once per outage and `StoreBack` when it ends. Budget writes that an outage held
back wait in order in the backlog and are written before anything else.
"""

from __future__ import annotations

import asyncio
import atexit
import inspect
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from loguru import logger

from ...ground.errors import StoreUnavailableError
from ..store import StoreBack, StoreLost
from . import refusals

__all__ = ["Link", "Write", "address", "transact"]

T = TypeVar("T")

# redis-py's own annotations are loose (bytes | str everywhere, transaction callbacks
# typed as returning None); its clients are taken as Any here and the replies checked.
_Client = Any


def address(url: str) -> str:
    """The URL without its user and password, for messages and the repr."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix://{parts.path}"
    host = parts.hostname or "localhost"
    return f"{parts.scheme}://{host}:{parts.port or 6379}{parts.path or ''}"


# A budget write: commands run in one MULTI transaction, now or after an outage.
Write = list[tuple[str, tuple[Any, ...]]]


class Link:
    """What every view of one RedisStore shares: the clients, the outage, the backlog.

    The sync client serves sync calls; async calls get a redis.asyncio client of their own
    event loop (its connections cannot be used from another loop).
    """

    def __init__(
        self, url: str, options: dict[str, Any], retry_every: float, *, cluster: bool = False
    ) -> None:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self.url = url
        self.options = options
        self.cluster = cluster
        # One retry, on a broken connection only: it covers a pooled connection that went
        # stale while Redis restarted. A timeout is never retried, so the store's `timeout`
        # is the longest one command waits (redis-py's default retries timeouts too, which
        # doubled it). Every write is idempotent by id, so a retried one that had in fact
        # run changes nothing.
        # A cluster client reads the topology when it is made, so it is made at the first
        # call (`_sync`): an unreachable cluster is then an outage like any other, not an
        # error out of the constructor.
        self.client: _Client = None
        if not cluster:
            self.client = redis.Redis(
                connection_pool=redis.BlockingConnectionPool.from_url(
                    url, retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)), **options
                )
            )
        self._aclients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )
        self._aqueues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue] = (
            weakref.WeakKeyDictionary()
        )
        self.where = address(url)
        self.retry_every = retry_every
        # Every error Redis or its client gives is an outage but a bug in our scripts
        # (`refusals`): the server cannot do what the router needs, for now.
        self.outage: tuple[type[BaseException], ...] = refusals.outage()
        self.lock = threading.Lock()
        self.retry_at = 0.0
        self.down_since: float | None = None
        self.error = ""
        self.recoveries = 0
        # Each bound router's observers, held weakly: a router that is gone hears nothing.
        self.observers: weakref.WeakSet[Callable[[object], None]] = weakref.WeakSet()
        # Budget writes that could not be made, oldest first; written before anything else.
        self.backlog: list[Write] = []
        atexit.register(self.flush_at_exit)

    def aclient(self) -> Any:
        import redis
        import redis.asyncio
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        loop = asyncio.get_running_loop()
        client = self._aclients.get(loop)
        if client is None and self.cluster:
            from redis.asyncio.cluster import RedisCluster

            client = RedisCluster.from_url(
                self.url, retry=Retry(NoBackoff(), 0), **_per_node(self.options)
            )
            self._aclients[loop] = client
        elif client is None:
            client = redis.asyncio.Redis(
                connection_pool=redis.asyncio.BlockingConnectionPool.from_url(
                    self.url,
                    retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
                    **self.options,
                )
            )
            self._aclients[loop] = client
        return client

    def _sync(self) -> _Client:
        if self.client is None:
            import redis
            from redis.backoff import NoBackoff
            from redis.cluster import RedisCluster
            from redis.retry import Retry

            # It follows MOVED and ASK itself and, after a node failed, reads the topology
            # again before the next call; it retries nothing else, timeouts included (its
            # default retries every error ten times).
            self.client = RedisCluster.from_url(
                self.url,
                retry=Retry(NoBackoff(), 0),
                connection_pool_class=redis.BlockingConnectionPool,
                **_per_node(self.options),
            )
        return self.client

    def run(self, op: Callable[[_Client], T]) -> T:
        """Run `op` against Redis, or raise StoreUnavailableError without waiting when
        Redis was found unreachable less than `retry_every` seconds ago."""
        self._guard()
        try:
            client = self._sync()
            if self.backlog:
                self._flush()
            result = op(client)
        except self.outage as error:
            if refusals.script_failed(error):
                raise
            self._lost(error)
            raise self._unavailable() from None
        self._answered()
        return result

    async def arun(self, op: Callable[[_Client], Awaitable[T]]) -> T:
        """`run` on this event loop's async client."""
        self._guard()
        client = self.aclient()
        if not self.cluster:
            return await self._arun(client, op)
        # redis.asyncio's cluster client refuses a call at once when a node's connections
        # are all in use; queued here instead, like the standalone client's blocking pool,
        # a burst of calls waits its turn rather than seeing an outage.
        queue = self._aqueues.get(asyncio.get_running_loop())
        if queue is None:
            queue = self._aqueues[asyncio.get_running_loop()] = _Queue(self.options["max_connections"])
        if not queue.ready:
            # Its first calls, made concurrently, race to read the topology and some find
            # their connection closed under them (seen with redis-py 8.1): one reads it first.
            async with queue.first:
                if not queue.ready:
                    try:
                        await client.initialize()
                    except self.outage as error:
                        self._lost(error)
                        raise self._unavailable() from None
                    queue.ready = True
        async with queue.turns:
            return await self._arun(client, op)

    async def _arun(self, client: _Client, op: Callable[[_Client], Awaitable[T]]) -> T:
        try:
            if self.backlog:
                claimed = self._claim()
                try:
                    await transact(client, claimed, cluster=self.cluster)
                except BaseException:
                    self._unclaim(claimed)
                    raise
            result = await (self._twice(client, op) if self.cluster else op(client))
        except self.outage as error:
            if refusals.script_failed(error):
                raise
            self._lost(error)
            raise self._unavailable() from None
        self._answered()
        return result

    async def _twice(self, client: _Client, op: Callable[[_Client], Awaitable[T]]) -> T:
        # A broken connection is tried once more, as the standalone client's pool does
        # (every write is idempotent by id); a timeout never is. Two ways it breaks here:
        # a connection the node dropped ("Connection lost" while writing, seen under 8
        # processes x 100 calls on a busy machine), and redis-py 8.1's async cluster client
        # handing a task a connection another task has just disconnected ("'NoneType'
        # object has no attribute 'writelines'"). Broken again: an outage.
        import redis

        try:
            return await op(client)
        except redis.ConnectionError:
            pass
        except AttributeError as error:
            if "NoneType" not in str(error):
                raise
        try:
            return await op(client)
        except AttributeError as error:
            if "NoneType" not in str(error):
                raise
            raise redis_connection_error(str(error)) from error

    def defer(self, commands: Write) -> None:
        """Keep a write for the next time Redis is reached, without trying it now."""
        with self.lock:
            self.backlog.append(commands)

    def write(self, commands: Write) -> None:
        """Make a budget write now, or keep it for when Redis answers again."""
        try:
            self.run(lambda r: transact(r, [commands], cluster=self.cluster))
        except StoreUnavailableError:
            with self.lock:
                self.backlog.append(commands)

    async def awrite(self, commands: Write) -> None:
        try:
            await self.arun(lambda r: transact(r, [commands], cluster=self.cluster))
        except StoreUnavailableError:
            with self.lock:
                self.backlog.append(commands)

    def flush_at_exit(self) -> None:
        """One last try to write what an outage held back, as the process ends; what still
        cannot be written is named, since those costs are then lost."""
        if not self.backlog:
            return
        self.retry_at = 0.0
        try:
            self.run(lambda r: None)
        except StoreUnavailableError:
            logger.warning(
                "policy_router: exiting with {} budget writes Redis at {} never received",
                len(self.backlog),
                self.where,
            )

    def close(self) -> None:
        """Write the backlog (one try, as at exit), then close the sync pool."""
        self.flush_at_exit()
        if self.client is None:
            return  # a cluster never reached
        # A client given its pool leaves the pool open on close(): disconnect it here.
        self.client.close()
        if not self.cluster:
            self.client.connection_pool.disconnect()

    async def aclose(self) -> None:
        """Close this event loop's async client, then `close`."""
        client = self._aclients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()
            if not self.cluster:
                await client.connection_pool.disconnect()
        self.close()

    def _flush(self) -> None:
        claimed = self._claim()
        try:
            transact(self.client, claimed, cluster=self.cluster)
        except BaseException:
            self._unclaim(claimed)
            raise

    def _claim(self) -> list[Write]:
        # Taken out of the backlog while being written, so no two callers write it twice.
        with self.lock:
            claimed, self.backlog = self.backlog, []
        return claimed

    def _unclaim(self, claimed: list[Write]) -> None:
        with self.lock:
            self.backlog[:0] = claimed

    def _guard(self) -> None:
        if self.down_since is not None and time.monotonic() < self.retry_at:
            raise self._unavailable()

    def _unavailable(self) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"Redis at {self.where} is unreachable ({self.error}); "
            f"trying again every {self.retry_every:g} s"
        )

    def _lost(self, error: BaseException) -> None:
        with self.lock:
            first = self.down_since is None
            now = time.monotonic()
            self.error = f"{type(error).__name__}: {str(error)[:200]}"
            self.retry_at = now + self.retry_every
            if first:
                self.down_since = now
        if first:
            self._tell(StoreLost(self.where, self.error))

    def _answered(self) -> None:
        if self.down_since is None:
            return
        with self.lock:
            if self.down_since is None:
                return
            lasted = time.monotonic() - self.down_since
            self.down_since = None
            self.recoveries += 1
        self._tell(StoreBack(self.where, lasted))

    def _tell(self, record: object) -> None:
        for emit in list(self.observers):
            emit(record)


class _Queue:
    """An event loop's turns at a cluster's async client, and its first contact."""

    def __init__(self, turns: int) -> None:
        self.turns = asyncio.Semaphore(turns)
        self.first = asyncio.Lock()
        self.ready = False


def redis_connection_error(message: str) -> BaseException:
    """redis-py's ConnectionError (an outage) with `message`."""
    import redis

    return redis.ConnectionError(message)


def _per_node(options: dict[str, Any]) -> dict[str, Any]:
    # A cluster client keeps a pool per node and takes no pool options of its own.
    return {k: v for k, v in options.items() if k != "timeout"}


def transact(client: _Client, writes: list[Write], *, cluster: bool = False) -> Any:
    """Queue the writes in one MULTI transaction and execute it (a coroutine for an async
    client, which the caller awaits). On a cluster, where writes of two routers may live
    in two slots, they go one by one instead, in order: each write is one script or one
    command, atomic by itself."""
    if cluster:
        # A cluster pipeline takes no scripts: each write goes as its own command.
        calls = [(name, args) for commands in writes for name, args in commands]
        if inspect.iscoroutinefunction(client.execute_command):

            async def each() -> list[Any]:
                return [await getattr(client, name)(*args) for name, args in calls]

            return each()
        return [getattr(client, name)(*args) for name, args in calls]
    pipe = client.pipeline(transaction=True)
    for commands in writes:
        for name, args in commands:
            getattr(pipe, name)(*args)
    return pipe.execute()
