"""Route and Reach: one way to reach one model, and where it sends the data.

A route is a LiteLLM model string plus the LiteLLM keyword arguments that go with it
(`api_base`, `api_key`, `api_version`, `extra_headers`, ...), the group callers reach it by,
its reach, and capability overrides. Its reach is what the on-device floor trusts, so it is
decided to fail closed (see `ground.reach`): a declared reach always wins; otherwise a route is
on-device only when the host it will really connect to is loopback and what answers there
is a local server, never a hosted vendor model behind a proxy.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from .capability import Capability, parse_declared
from .errors import ConfigError
from .reach import Reach, infer
from .route_fields import check_fields
from .secrets import MASK, is_secret_name, redact, secrets_in

__all__ = ["Reach", "Route", "default_id", "identities", "redact", "shared_ids"]  # Reach is re-exported from reach.py


class Route:
    """One way to reach one model: a LiteLLM model string and the call kwargs for it.

    `Route("openai/gpt-4o-mini", group="smart", api_key=...)` routes calls to group `smart`
    through `litellm.completion(model="openai/gpt-4o-mini", api_key=..., ...)`. Every keyword
    that is not one of the route's own (`group`, `name`, `reach`, `capabilities`, `prices`,
    `retry`) is passed to LiteLLM as written. A route is immutable.

    - `group` defaults to the model string, so an ungrouped route is reached by its model.
    - `id` is the route's identity: health, rate windows, ordering statistics, the attempt
      log and the report are kept under it, so renaming a route, or rotating its key, keeps
      its history, and the same `id` in two groups is one deployment with one breaker. It
      defaults to `default_id(model, api_base)`: the model string, with `@` and the
      `api_base` when there is one; never the key. Give an explicit `id` per account when
      one model at one base is reached with two keys.
    - `name` labels the route in journeys and logs; it defaults to the explicit `id`, else
      the model string, and the router makes duplicates unique.
    - `reach`: a declared reach always wins. Undeclared, the route is `ON_DEVICE` only when
      its `api_base` host (or, without one, its provider's default base: `ollama` and
      `llamafile` are loopback) is `localhost`, 127.0.0.0/8 or ::1 *and* it is a
      local-serving provider or a model LiteLLM does not list; a hosted vendor model behind
      a loopback proxy stays `VENDOR`. `reach_reason` says how the reach was decided.
    - `capabilities` override what LiteLLM's model info says, e.g. `{"tools": True}`.
    - `prices` is the route's `PriceTable` (budgets and `Order.CHEAPEST` read it; the
      package's dated table is `PriceTable.default()`); without one the route is unpriced,
      and a budget refuses it unless `Budget(unpriced="allow")`.
    - `retry` is a `Retry` for this route alone, in place of the router's.
    - `output_limit` declares the most tokens the model writes in one reply, for a model
      LiteLLM's info does not know: a budget bounds calls without `max_tokens` by it.
    - `context_window` declares the most tokens the model takes in (prompt and reply cap),
      else LiteLLM's `max_input_tokens` for the model: a prompt that cannot fit skips the
      route before sending ("prompt 150,211 tokens > window 128,000").
    - `first_token_timeout` bounds one attempt's wait for its first chunk (a stream) or its
      whole reply (any other call), and `stall_timeout` a stream's wait for each chunk after
      the first: past either, the attempt ends and the next route is asked (a stall after
      the first chunk is a cut: raised in the stream, or restarted with
      `stream_failure="restart"`). Both live inside the request's deadline; neither waits
      for the socket's read timeout.
    - `enabled=False` keeps the route in its group but never sends it a request: every
      request skips it with "disabled" (a real switch, not a LiteLLM keyword).
    - `rpm` and `tpm` are the provider account's requests and tokens per minute for this
      route: the router counts them in its store and skips the route, before sending,
      while the window is full (see `policies.limits`).

    Secrets (`api_key`, any kwarg whose name says key, token, secret or password, and such
    headers, and any value given in `secrets=` that no such name carries) never appear in
    the repr, and the router redacts them from journeys, logs and
    error texts. The route does not check a key works: `router.preflight()` does.

    Raises:
        ConfigError: a field is wrong (a blank model, a price table that is none, a limit
            that is not a positive whole number); the message names the field.
    """

    model: str
    group: str
    id: str
    id_declared: bool
    name: str
    reach: Reach
    reach_declared: bool
    reach_reason: str
    output_limit: int | None
    context_window: int | None
    first_token_timeout: float | None
    stall_timeout: float | None
    enabled: bool
    rpm: int | None
    tpm: int | None
    prices: Any
    retry: Any
    kwargs: MappingProxyType[str, Any]
    """The LiteLLM keyword arguments sent with every call on this route (read-only). A slot,
    not a property: every request reads it, and a property's frame costs a microsecond
    after a LiteLLM call has left the CPU's caches cold."""
    _capabilities: Mapping[Capability, bool]
    _secrets: tuple[str, ...]
    # The annotations above are the route's one list of what it keeps: its slots too.
    __slots__ = tuple(__annotations__)

    def __init__(
        self,
        model: str,
        *,
        group: str | None = None,
        name: str | None = None,
        id: str | None = None,
        reach: Reach | str | None = None,
        capabilities: Mapping[str, bool] | None = None,
        prices: Any = None,
        retry: Any = None,
        output_limit: int | None = None,
        context_window: int | None = None,
        first_token_timeout: float | None = None,
        stall_timeout: float | None = None,
        rpm: int | None = None,
        tpm: int | None = None,
        secrets: tuple[str, ...] = (),
        enabled: bool = True,
        **litellm_kwargs: Any,
    ) -> None:
        api_base = check_fields(
            model, group, name, id, litellm_kwargs, enabled,
            {"output_limit": output_limit, "context_window": context_window, "rpm": rpm, "tpm": tpm},
            {"first_token_timeout": first_token_timeout, "stall_timeout": stall_timeout},
        )
        set_ = object.__setattr__
        set_(self, "enabled", enabled)
        set_(self, "model", model)
        set_(self, "group", group or model)
        secret_values = secrets_in(litellm_kwargs, secrets)
        set_(self, "id", id if id is not None else redact(default_id(model, api_base), secret_values))
        set_(self, "id_declared", id is not None)
        set_(self, "name", name or id or model)
        set_(self, "kwargs", MappingProxyType(dict(litellm_kwargs)))
        set_(self, "_secrets", secret_values)
        set_(
            self,
            "_capabilities",
            MappingProxyType(parse_declared(capabilities, f"Route({model!r}).capabilities")),
        )
        if reach is None:
            info = litellm_kwargs.get("model_info")
            aliases = [
                str(v)
                for v in (
                    litellm_kwargs.get("base_model"),
                    info.get("base_model") if isinstance(info, Mapping) else None,
                )
                if isinstance(v, str) and v
            ]
            provider = litellm_kwargs.get("custom_llm_provider") or self.provider
            inferred, why = infer(model, str(provider), api_base, aliases)
            set_(self, "reach", inferred)
            set_(self, "reach_reason", why)
            set_(self, "reach_declared", False)
        else:
            try:
                set_(self, "reach", Reach(reach))
            except ValueError:
                raise ConfigError(
                    f"Route({model!r}).reach must be 'on_device' or 'vendor', got {reach!r}"
                ) from None
            set_(self, "reach_reason", "declared")
            set_(self, "reach_declared", True)
        if prices is not None and not callable(getattr(prices, "price_for", None)):
            # Checked by shape: this part may not import the policies' PriceTable.
            raise ConfigError(
                f"Route({model!r}).prices must be a PriceTable (PriceTable.from_dict(...), "
                f"PriceTable.load(path) or PriceTable.from_litellm(...)), got {type(prices).__name__}"
            )
        set_(self, "prices", prices)
        set_(self, "retry", retry)
        set_(self, "output_limit", output_limit)
        set_(self, "context_window", context_window)
        set_(self, "first_token_timeout", first_token_timeout)
        set_(self, "stall_timeout", stall_timeout)
        set_(self, "rpm", rpm)
        set_(self, "tpm", tpm)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Route is immutable; build a new one instead of setting {name}")

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        # A copy, a deep copy or a pickle of a route is rebuilt from what it keeps:
        # `copy.deepcopy` of any record holding a route (`dataclasses.asdict` of a
        # `Routed`) raised "Route is immutable".
        return _restored, (self._kept(),)

    def _kept(self) -> dict[str, Any]:
        """What the route keeps, its read-only views as plain dicts (see `_restored`)."""
        kept = {name: getattr(self, name) for name in Route.__slots__}
        kept["kwargs"], kept["_capabilities"] = dict(self.kwargs), dict(self._capabilities)
        return kept

    @property
    def provider(self) -> str:
        """The provider prefix of the model string (`openai` in `openai/gpt-4o-mini`), or ''."""
        return self.model.split("/", 1)[0] if "/" in self.model else ""

    @property
    def capabilities(self) -> Mapping[Capability, bool]:
        """The route's own capability declarations (read-only), before LiteLLM's info."""
        return self._capabilities

    @property
    def secrets(self) -> tuple[str, ...]:
        """The secret values among the route's kwargs, longest first, for redaction."""
        return self._secrets

    def redact(self, text: str) -> str:
        """`text` with this route's secrets replaced by `***`."""
        return redact(text, self._secrets)

    def with_name(self, name: str) -> Route:
        """The same route under another name (its identity unchanged)."""
        return self._with(name, self.id)

    def _with(self, name: str, id: str) -> Route:
        # Everything else as it is: a declared id stays declared, a suffixed default id
        # stays a default, the reach as it was decided.
        kept = self._kept()
        kept["name"], kept["id"] = name, id
        return _restored(kept)

    def __repr__(self) -> str:
        shown = {
            k: (MASK if is_secret_name(k) else _redact_value(v, self._secrets))
            for k, v in self.kwargs.items()
        }
        parts = [repr(self.model), f"group={self.group!r}"]
        if self.id_declared or self.id != self.model:
            parts.append(f"id={self.id!r}")
        if self.name != self.model and self.name != self.id:
            parts.append(f"name={self.name!r}")
        parts.append(f"reach={self.reach.value}{'' if self.reach_declared else ' (inferred)'}")
        if self._capabilities:
            parts.append(f"capabilities={ {c.value: v for c, v in self._capabilities.items()} }")
        parts.extend(f"{k}={v}" for k, v in (("rpm", self.rpm), ("tpm", self.tpm)) if v)
        if not self.enabled:
            parts.append("enabled=False")
        parts.extend(f"{k}={v!r}" for k, v in shown.items())
        return f"Route({', '.join(parts)})"


def _restored(kept: dict[str, Any]) -> Route:
    """A route made of what another kept (`Route._kept`), without checking it again."""
    route = object.__new__(Route)
    for name, value in kept.items():
        object.__setattr__(route, name, value)
    object.__setattr__(route, "kwargs", MappingProxyType(kept["kwargs"]))
    object.__setattr__(route, "_capabilities", MappingProxyType(kept["_capabilities"]))
    return route


def _redact_value(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, Mapping):
        return {
            k: (MASK if is_secret_name(str(k)) else _redact_value(v, secrets))
            for k, v in value.items()
        }
    return redact(value, secrets) if isinstance(value, str) else value


def default_id(model: str, api_base: str | None) -> str:
    """A route's identity when none is given: the model string, plus `@` and the base URL's
    host, port and path when the route names one. Never a credential: the URL's user, password,
    query and fragment are left out (a key often rides there), so a rotated key keeps the
    route's history."""
    if not api_base or not api_base.strip():
        return model
    base = api_base.strip()
    parts = urlsplit(base if "://" in base else f"//{base}")
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    where = f"{parts.hostname or ''}{port}{parts.path.rstrip('/')}"
    return f"{model}@{where}" if where else model


def identities(routes: list[Route]) -> list[Route]:
    """Routes as a router keeps them: names unique across the router (a repeated name gets
    `#2`, `#3`, ...) and ids unique within each group.

    Two routes of one group given the same explicit id are refused, naming both. Two whose
    *default* ids collide (one model at one base, two keys) get a positional suffix on the
    id, so their history follows their position (`shared_ids` says so for `check()`). The
    same id in two groups is kept: one deployment, one breaker.
    """
    declared: dict[tuple[str, str], int] = {}
    for i, r in enumerate(routes):
        if r.id_declared:
            first = declared.setdefault((r.group, r.id), i)
            if first != i:
                raise ConfigError(
                    f"routes[{first}] ({routes[first].name!r}) and routes[{i}] ({r.name!r}) "
                    f"in group {r.group!r} both have id={r.id!r}: an id names one "
                    "deployment; give each its own id"
                )
    taken = {(g, i) for g, i in declared}
    names: dict[str, int] = {}
    ids: dict[tuple[str, str], int] = {}
    out = []
    for r in routes:
        n = names.get(r.name, 0) + 1
        names[r.name] = n
        name = r.name if n == 1 else f"{r.name}#{n}"
        new_id = None
        if not r.id_declared:
            k = ids.get((r.group, r.id), 0) + 1
            ids[(r.group, r.id)] = k
            while k > 1 and (r.group, f"{r.id}#{k}") in taken:
                k += 1
            if k > 1:
                new_id = f"{r.id}#{k}"
        if name == r.name and new_id is None:
            out.append(r)
        elif new_id is None:
            out.append(r.with_name(name))
        else:
            out.append(r._with(name, new_id))
    return out


def shared_ids(routes: list[Route]) -> list[str]:
    """What `check()` says about identities the router made up: default ids suffixed by
    position within a group, and one default id in several groups reached with different
    keys (one breaker for what may be two accounts). `routes` as `identities` returned them."""
    notes = []
    for r in routes:
        if not r.id_declared and "#" in r.id and r.id.rsplit("#", 1)[0] == default_id(
            r.model, r.kwargs.get("api_base") or r.kwargs.get("base_url")
        ):
            notes.append(
                f"route {r.name!r} has no id and shares {r.model!r} at its base with another "
                f"route of group {r.group!r}: it is known as {r.id!r}, so its health and "
                "statistics follow its position in the list; give each account an explicit "
                "id= to keep its history when the list changes"
            )
    by_id: dict[str, list[Route]] = {}
    for r in routes:
        if not r.id_declared:
            by_id.setdefault(r.id, []).append(r)
    for rid, rs in by_id.items():
        groups = sorted({r.group for r in rs})
        keys = {r.secrets for r in rs}
        if len(groups) > 1 and len(keys) > 1:
            notes.append(
                f"routes {[r.name for r in rs]} in groups {groups} share the default id "
                f"{rid!r} but carry different keys: they share one breaker and one rate "
                "window; give each account an explicit id= if they are separate accounts"
            )
    return notes
