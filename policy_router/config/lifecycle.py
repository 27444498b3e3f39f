"""A router's life: the `Assembly` it runs under now, its changes while it runs
(`reconfigure`, `reload`), and its end (`close`). `Router` holds one `Lifecycle` and hands
these calls to it; every request reads `now` once and keeps that assembly to its end.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..ground.errors import ConfigError, RouterClosedError
from ..observe.observers import Observer
from .assembly import Assembly, assemble
from .changes import Changes, Reconfigured, diff, forgotten
from .litellm import Loaded

__all__ = ["Lifecycle"]


class Lifecycle:
    """What `owner` (a router) runs under, and how that changes (see the module docstring).

    `owner` is what observers are attached to and listeners are told of."""

    def __init__(self, owner: Any, args: Mapping[str, Any]) -> None:
        self._owner = owner
        self._lock = threading.Lock()  # one reconfiguration at a time
        self.now: Assembly = assemble(args)
        self.notes: tuple[str, ...] = ()  # what the file it was loaded from does not apply
        self.source: tuple[Any, Mapping[str, Any]] | None = None  # from_config's file
        self.closed = False
        self.owned: list[Any] = []  # what the router created, and so closes (from_config)
        self._listeners: list[Callable[[Any], None]] = []  # told after each reconfigure

    def attach(self, observers: Sequence[Observer]) -> None:
        """Hand the router to each observer that reads it (`attach(router)`)."""
        for observer in observers:
            attach = getattr(observer, "attach", None)
            if callable(attach):
                attach(self._owner)  # an observer that reads the router (OTelObserver's gauges)

    def adopt(self, loaded: Loaded, overrides: Mapping[str, Any], source: Any = None) -> None:
        """The router was built from `loaded` (a policy file's or model list's routes and
        policies): keep its notes, own what it built (a store,
        a metrics store: made from its URL or path, unless `overrides` gave one), and
        remember `source`, the file `reload` reads again."""
        self.notes = tuple(loaded.notes)
        for made in ("store", "metrics"):
            if made in loaded.policies and made not in overrides:
                self.owned.append(loaded.policies[made])
        if source is not None:
            self.source = (source, dict(overrides))

    def ensure_open(self) -> None:
        """Raise `RouterClosedError` once the router is closed."""
        if self.closed:
            raise RouterClosedError(
                f"router {self.now.name!r} is closed: nothing was sent; build a new Router"
            )

    def reconfigure(self, /, **changes: Any) -> Changes:
        """Change any constructor argument (`routes=`, `order=`, `budget=`, `breaker=`, ...)
        while the router runs, keeping what it learned; returns what changed.

        Everything is validated first, with the constructor's errors: a change that fails
        leaves the router exactly as it was. The swap is atomic: a request in flight
        finishes under the configuration it started with, the next one sees the new one.
        Health, rate windows and spend stay in the store, by route name and budget name;
        a group whose routes and ordering are unchanged keeps its round-robin turn, and an
        unchanged ordering keeps its object (FASTEST's statistics). A route whose id is
        gone is forgotten (its health reset); a new id starts fresh, and a renamed route
        (same id) keeps its history. Observers are told
        `Reconfigured(changes)`.
        """
        self.ensure_open()
        with self._lock:
            before = self.now
            after = assemble({**before.args, **changes}, before)
            found = diff(before.routes, before.args["order"], after.routes, after.args["order"])
            for gone in forgotten(before.routes, after.routes):
                if before.health is not None:
                    before.health.retired.add(gone)  # requests in flight write nothing of it
                after.store.reset_health(gone)
            self.now = after
            if after.observers is not before.observers:
                self.attach([o for o in after.observers if o not in before.observers])
        if before.recorder is not None and before.recorder is not after.recorder:
            before.recorder.stop()  # what it buffered is written to the store it had
        after.emit(Reconfigured(found))
        for listener in list(self._listeners):
            listener(self._owner)
        return found

    def on_reconfigure(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        """Call `listener(router)` after every `reconfigure` (and `reload`) has taken
        effect, in the thread that reconfigured; returns the function that stops it.

        For what mirrors the router's configuration elsewhere (the LiteLLM provider keeps
        LiteLLM's model info of each group current with it). A listener that raises
        fails the `reconfigure` call after the change has taken effect."""
        self._listeners.append(listener)

        def stop() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return stop

    def reload(self) -> Changes:
        """Read the file this router was built from (`Router.from_config`) again and apply it
        with `reconfigure`. A store (or metrics store) the file names is kept while its
        address is unchanged."""
        from .policy_file import load

        if self.source is None:
            raise ConfigError("reload() needs a router built with Router.from_config(path)")
        config, overrides = self.source
        loaded = load(config)
        if loaded.missing:
            raise ConfigError("; ".join(loaded.missing))
        policies = {**loaded.policies, **overrides}
        for kind in ("store", "metrics"):
            built, held = policies.get(kind), self.now.args[kind]
            if built is not None and repr(built) == repr(held):
                built.close()  # the same address: keep the store the router holds
                policies[kind] = held
        found = self.reconfigure(routes=loaded.routes, **policies)
        self.notes = tuple(loaded.notes)
        return found

    def close(self) -> None:
        """Close the router: later calls raise `RouterClosedError`. Idempotent.

        Closes only what the router created: a store it built from a config's URL (after
        one try to write what an outage held back). A store passed as `store=` is the
        caller's and stays open; LiteLLM's HTTP clients are LiteLLM's, shared by every
        caller in the process, and stay open too. A call already in flight is not waited
        for: close once the calls you care about have returned.
        """
        if self.closed:
            return
        self.closed = True
        if self.now.recorder is not None:
            self.now.recorder.stop()
        for owned in self.owned:
            owned.close()

    async def aclose(self) -> None:
        """The async twin of `close`: an owned store's connections on this loop close too."""
        if self.closed:
            return
        self.closed = True
        if self.now.recorder is not None:
            await asyncio.to_thread(self.now.recorder.stop)
        for owned in self.owned:
            aclose = getattr(owned, "aclose", None)
            await aclose() if aclose is not None else owned.close()
