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
```

A key is kept only as its SHA-256: the plain key read from the environment is hashed when
the file is loaded and never stored, printed or logged.
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

__all__ = ["ApiKey", "digest", "keys_of"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKey:
    """One tenant of the server: its name, its key's SHA-256 (never the key), its own
    budget and rate limit when it has them, and whether its requests stay on the device."""

    name: str
    sha256: str
    budget: Budget | None = None
    rpm: int | None = None
    on_device: bool = False

    def __repr__(self) -> str:
        return f"ApiKey({self.name!r}, sha256={self.sha256[:8]}…)"


def digest(key: str) -> str:
    """The SHA-256 of `key`, in hex: what a server keeps of it."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def keys_of(spec: ServerSpec | None, source: str, missing: list[str]) -> tuple[ApiKey, ...]:
    """The keys of a `server:` section, hashed; a variable that is not set goes to
    `missing` (an error when serving, listed by `policy-router check`)."""
    if spec is None:
        return ()
    found: list[ApiKey] = []
    for name, k in spec.keys.items():
        where = f"server.keys.{name}"
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
            sha = digest(plain)
        else:
            sha = (k.key_sha256 or "").lower()
        budget = None
        if k.budget is not None:
            try:
                cap = Money.parse(k.budget.cap, k.budget.currency, where=f"{where}.budget.cap")
                budget = Budget(
                    cap, k.budget.currency, unpriced=k.budget.unpriced, strict=k.budget.strict,
                    name=f"key:{name}",
                )
            except ConfigError as error:
                raise ConfigError(f"{source}: {where}.budget: {error}") from None
        found.append(ApiKey(name=name, sha256=sha, budget=budget, rpm=k.rpm, on_device=k.on_device))
    return tuple(found)
