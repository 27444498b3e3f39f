"""The API keys of a policy file's `server:` section (`config.spec.ServerSpec`): the API keys `policy-router serve` accepts, each a
tenant with its own budget, rate limit and floor.

```yaml
server:
  keys:
    team-a:
      key: os.environ/TEAM_A_KEY      # read from the environment, hashed at once
      budget: {cap: "5.00"}
      rpm: 60
    on-device-app:
      key_sha256: 9f86d081884c7d65...  # only the key's SHA-256 at rest
      on_device: true                 # every request of this key stays on the machine
      groups: [smart]                 # the groups it may call (absent: all)
```

A key is kept only as its SHA-256: the plain key read from the environment is hashed when
the file is loaded and never stored, printed or logged.

A key read from the environment is refused when it is empty or holds a character a client
cannot send in a header (a space, a control character, anything beyond ASCII); surrounding
whitespace (a Kubernetes secret made from a file ends in a newline) is stripped, with a
warning naming the variable. Two tenants with one key are refused, naming both: the first
would otherwise win every request, and the second's budget and rate limit would never apply.
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass
from typing import Any

from ..ground.errors import ConfigError
from ..ground.money import Money
from ..policies.budget import Budget
from .litellm import ENV_PREFIX, secret
from .spec import ServerSpec

__all__ = ["ApiKey", "check_distinct", "digest", "keys_of", "plain_key", "scoped_budgets", "teams_of"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKey:
    """One tenant of the server: its name, its key's SHA-256 (never the key), its own
    budget and rate limit when it has them, and whether its requests stay on the device."""

    name: str
    sha256: str
    budget: Budget | None = None
    rpm: int | None = None
    on_device: bool = False
    groups: frozenset[str] | None = None
    """The groups this key may call; None: every group."""
    team: str | None = None
    """The team whose budget its calls count against too."""
    admin: bool = False
    """An admin key (`server.admin_keys`): reads every scope's spending and sets caps
    live; calls no model."""

    def __repr__(self) -> str:
        return f"ApiKey({self.name!r}, sha256={self.sha256[:8]}…)"


def digest(key: str) -> str:
    """The SHA-256 of `key`, in hex: what a server keeps of it."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def plain_key(value: str, where: str) -> str:
    """A key as read from `where` (a variable), checked: stripped of surrounding whitespace
    (with a warning), refused when empty or holding a character a header cannot carry."""
    stripped = value.strip()
    if not stripped:
        raise ConfigError(
            f"{where} is empty: an empty key would let any request with an empty "
            "Authorization header in; set it to the key, or remove the key"
        )
    if stripped != value:
        warnings.warn(
            f"{where} has whitespace around the key (a newline at its end?); it was "
            "stripped, and clients send the key without it",
            UserWarning,
            stacklevel=4,
        )
    if not all(33 <= ord(c) <= 126 for c in stripped):
        raise ConfigError(
            f"{where} holds a space, a control character or a character beyond ASCII, "
            "which a client cannot send in an Authorization header; use printable ASCII"
        )
    return stripped


def check_distinct(keys: tuple[ApiKey, ...], source: str) -> None:
    """Refuse two tenants with one key, naming both (see the module docstring)."""
    seen: dict[str, str] = {}
    for key in keys:
        other = seen.setdefault(key.sha256, key.name)
        if other != key.name:
            raise ConfigError(
                f"{source}: server keys {other!r} and {key.name!r} are the same key: requests "
                "with it would all go to one tenant, whose budget and rate limit the other "
                "would never get; give each tenant its own key"
            )


def keys_of(
    spec: ServerSpec | None, source: str, missing: list[str], groups: frozenset[str] = frozenset()
) -> tuple[ApiKey, ...]:
    """The keys of a `server:` section, hashed; a variable that is not set goes to
    `missing` (an error when serving, listed by `policy-router check`). A key's `groups`
    must each be one of `groups` (the file's)."""
    if spec is None:
        return ()
    found: list[ApiKey] = []
    for name, k in spec.keys.items():
        where = f"server.keys.{name}"
        if k.team is not None and k.team not in spec.teams:
            raise ConfigError(
                f"{source}: {where}.team names {k.team!r}, which server.teams does not define; "
                f"teams: {sorted(spec.teams)}"
            )
        if k.key is not None:
            if not k.key.startswith(ENV_PREFIX):
                warnings.warn(
                    f"{source}: {where}.key is a literal key; write key: os.environ/NAME, "
                    "or key_sha256: its SHA-256, and keep the key out of the file",
                    UserWarning,
                    stacklevel=4,
                )
            plain: Any = secret(k.key, f"{where}.key", missing)
            if plain is None:
                continue
            named = k.key.removeprefix(ENV_PREFIX) if k.key.startswith(ENV_PREFIX) else None
            try:
                plain = plain_key(plain, f"{where}.key" + (f" (variable {named})" if named else ""))
            except ConfigError as error:
                raise ConfigError(f"{source}: {error}") from None
            sha = digest(plain)
        else:
            sha = (k.key_sha256 or "").lower()
        budget = _budget(k.budget, f"{where}.budget", source, key=name)

        allowed = None
        if k.groups is not None:
            unknown = sorted(set(k.groups) - groups)
            if unknown and groups:
                raise ConfigError(
                    f"{source}: {where}.groups names {unknown}, which the file does not "
                    f"define; groups: {sorted(groups)}"
                )
            allowed = frozenset(k.groups)
        found.append(ApiKey(
            name=name, sha256=sha, budget=budget, rpm=k.rpm, on_device=k.on_device, groups=allowed,
            team=k.team,
        ))
    for name, admin in spec.admin_keys.items():
        where = f"server.admin_keys.{name}"
        if name in spec.keys:
            raise ConfigError(f"{source}: {where}: the name {name!r} is a key's already; name admins apart")
        if admin.key is not None:
            plain = secret(admin.key, f"{where}.key", missing)
            if plain is None:
                continue
            named = admin.key.removeprefix(ENV_PREFIX) if admin.key.startswith(ENV_PREFIX) else None
            try:
                sha = digest(plain_key(plain, f"{where}.key" + (f" (variable {named})" if named else "")))
            except ConfigError as error:
                raise ConfigError(f"{source}: {error}") from None
        else:
            sha = (admin.key_sha256 or "").lower()
        found.append(ApiKey(name=name, sha256=sha, admin=True))
    keys = tuple(found)
    check_distinct(keys, source)
    return keys


def teams_of(spec: ServerSpec | None, source: str) -> dict[str, Budget | None]:
    """Each team of a `server:` section and its budget (None: a team with none)."""
    if spec is None:
        return {}
    return {
        name: _budget(team.budget, f"server.teams.{name}.budget", source, team=name)
        for name, team in spec.teams.items()
    }


def scoped_budgets(spec: ServerSpec | None, source: str) -> list[Budget]:
    """Every team's and every key's budget of a `server:` section, whether or not the
    keys' variables are set (what `policy-router spend` reads)."""
    if spec is None:
        return []
    found = [b for b in teams_of(spec, source).values() if b is not None]
    for name, k in spec.keys.items():
        budget = _budget(k.budget, f"server.keys.{name}.budget", source, key=name)
        if budget is not None:
            found.append(budget)
    return found


def _budget(spec: Any, where: str, source: str, **scope: str) -> Budget | None:
    if spec is None:
        return None
    try:
        cap = Money.parse(spec.cap, spec.currency, where=f"{where}.cap")
        budget: Budget = spec.budget(cap, **scope)
    except ConfigError as error:
        raise ConfigError(f"{source}: {where}: {error}") from None
    return budget
