"""The router's own CPU per call, this checkout against a git revision, in one process.

Run: `.venv/bin/python tests/bench/versus.py REV [rounds] [calls]` (REV defaults to HEAD).

Two runs of `overhead.py` on this shared 2-core machine differ by tens of percent, and
`cold.py` run alone reads the same code 60 µs one time and 100 µs the next (the heap's
layout moves with everything the process did before): too much noise to see a change of
10 µs. Here the package at REV is taken out of git (`git archive`) into a temporary folder
and imported beside this checkout's under another name (`pr_rev`: the package imports
itself relatively), so both routers, and plain LiteLLM, are timed in the same process,
around real calls to one FakeProvider, batch for batch, the first of each round rotating.
The figure to read is the per-round difference; both absolute columns drift together.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import litellm
from _fake import KEY, MESSAGES, fake_in_child
from loguru import logger

import policy_router

INSIDE = [0.0]


def _package_at(rev: str, into: Path) -> Any:
    """The `policy_router` package as it was at `rev`, imported as `pr_rev`."""
    root = Path(policy_router.__file__).resolve().parent.parent
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", rev, "policy_router"],
        check=True, capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    (into / "policy_router").rename(into / "pr_rev")
    sys.path.insert(0, str(into))
    package = importlib.import_module("pr_rev")
    logger.disable("pr_rev")  # as the package disables its own name on import
    return package


def _router(package: Any, base: str) -> Any:
    prices = package.PriceTable.from_dict(
        {
            "currency": "USD",
            "as_of": "2026-11-29",
            "source": "benchmark",
            "models": {f"openai/{n}": {"input": "0.15", "output": "0.60"} for n in "abc"},
        }
    )
    routes = [
        package.Route(
            f"openai/{n}", group="g", api_base=base, api_key=KEY,
            capabilities={"tools": True, "streaming": True}, prices=prices,
        )
        for n in "abc"
    ]
    return package.Router(routes, breaker=package.Breaker())


async def _measure(fn: Callable[[], Awaitable[Any]], calls: int) -> float:
    INSIDE[0] = 0.0
    started = time.process_time()
    for _ in range(calls):
        await fn()
    return (time.process_time() - started - INSIDE[0]) / calls


async def main(rev: str, rounds: int, calls: int) -> None:
    original = litellm.acompletion

    async def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return await original(*args, **kwargs)
        finally:
            INSIDE[0] += time.process_time() - started

    litellm.acompletion = timed
    with tempfile.TemporaryDirectory() as folder, fake_in_child() as base:
        then, now = _router(_package_at(rev, Path(folder)), base), _router(policy_router, base)
        plain = {"api_base": base, "api_key": KEY, "num_retries": 0, "max_retries": 0}
        variants: dict[str, Callable[[], Awaitable[Any]]] = {
            "plain litellm.acompletion": lambda: litellm.acompletion(
                model="openai/a", messages=MESSAGES, **plain
            ),
            f"router at {rev}": lambda: then.acompletion(model="g", messages=MESSAGES),
            "router in this checkout": lambda: now.acompletion(model="g", messages=MESSAGES),
        }
        for fn in variants.values():
            await _measure(fn, 30)  # clients, caches, the lane's first full reading
        samples: dict[str, list[float]] = {name: [] for name in variants}
        names = list(variants)
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                gc.collect()
                samples[name].append(await _measure(variants[name], calls))
    print(f"CPU outside LiteLLM per call, 3 routes + breaker, {rounds} rounds x {calls} calls:")
    for name, values in samples.items():
        print(
            f"  {name:<28} median {statistics.median(values) * 1e6:7.1f} us"
            f"  (rounds {min(values) * 1e6:.0f}-{max(values) * 1e6:.0f})"
        )
    then_, now_ = samples[f"router at {rev}"], samples["router in this checkout"]
    change = [b - a for a, b in zip(then_, now_, strict=True)]
    print(f"  this checkout - {rev}: median {statistics.median(change) * 1e6:+.1f} us a call")


if __name__ == "__main__":
    asyncio.run(
        main(
            sys.argv[1] if len(sys.argv) > 1 else "HEAD",
            int(sys.argv[2]) if len(sys.argv) > 2 else 7,
            int(sys.argv[3]) if len(sys.argv) > 3 else 150,
        )
    )
