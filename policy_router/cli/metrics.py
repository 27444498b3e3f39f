"""`policy-router metrics create|inspect|migrate TARGET`: a metrics store's schema, by hand.

TARGET is a SQLite path (or `sqlite:PATH`), `duckdb:PATH` (or a path ending `.duckdb`) or
a PostgreSQL DSN (`postgresql://...`; `os.environ/NAME` reads it from the environment).
`inspect` reads only; `create` makes the current schema where there is none and refuses
anything else; `migrate` brings an older schema to the current one (stop every writer
first). Exit codes: 0 done (or current), 1 `inspect` found the target not ready, 2 refused.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict

from ..config.litellm import ENV_PREFIX
from ..ground.errors import ConfigError
from ..observe.metrics import SQLMetrics, open_target

__all__ = ["run", "target"]


def target(text: str) -> SQLMetrics:
    """The store TARGET names, an `os.environ/NAME` read from the environment."""
    if text.startswith(ENV_PREFIX):
        name = text.removeprefix(ENV_PREFIX)
        found = os.environ.get(name)
        if found is None:
            raise ConfigError(f"metrics TARGET: environment variable {name} is not set")
        text = found
    return open_target(text)


def run(argv: Sequence[str], out: Callable[[str], None]) -> int:
    parser = argparse.ArgumentParser(prog="policy-router metrics", description=__doc__)
    parser.add_argument("verb", choices=("create", "inspect", "migrate"))
    parser.add_argument("target", help="a SQLite path, duckdb:PATH, or postgresql://...")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(list(argv))
    store = target(args.target)
    try:
        state = {"create": store.create, "inspect": store.inspect, "migrate": store.migrate}[args.verb]()
    finally:
        store.close()
    out(json.dumps(asdict(state), indent=2) if args.json else str(state))
    return 1 if args.verb == "inspect" and state.state != "current" else 0
