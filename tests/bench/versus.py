"""The router's own CPU per call, this checkout against a git revision, in one process.

Run: `.venv/bin/python tests/bench/versus.py REV [calls] [--budget]` (REV defaults to
HEAD; `--budget`: both routers with `Budget("1000000")`, every call with `max_tokens=64`,
so each reserves, is held to its bound at the wire and settles).

Two runs of `overhead.py` on this shared 2-core machine differ by tens of percent: too
much noise to see a change of a few µs. Here the package at REV is taken out of git
(`git archive`) and this checkout's package copied as it is (uncommitted changes
included), both imported under other names (`pr_rev`, `pr_now`: the package imports
itself relatively), and the common call (3 routes, the default breaker) is timed around
real calls to one FakeProvider, plain LiteLLM, REV and this checkout taking turns call by
call (the order reversed every other turn), on the event loop's thread's own CPU clock,
less the thread's CPU inside `litellm.acompletion`.

The package imported second reads a few µs cheaper, for where it lies in memory, whatever
its code: so the comparison runs twice, in two processes, each version imported first
once. The change is the mean of the two runs' differences; half their gap is that bias.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import io
import json
import os
import shutil
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

ROOT = Path(__file__).resolve().parent.parent.parent
INSIDE = [0]
BUDGET = "--budget" in sys.argv
ASKED: dict[str, Any] = {"max_tokens": 64} if BUDGET else {}


def _import(name: str, into: Path) -> Any:
    sys.path.insert(0, str(into))
    package = importlib.import_module(name)
    logger.disable(name)  # as the package disables its own name on import
    return package


def _at(rev: str, into: Path) -> Any:
    """The `policy_router` package as it was at `rev`, imported as `pr_rev`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "policy_router"],
        check=True, capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    (into / "policy_router").rename(into / "pr_rev")
    return _import("pr_rev", into)


def _checkout(into: Path) -> Any:
    """This checkout's `policy_router` package as it is, imported as `pr_now`."""
    skipped = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "policy_router", into / "pr_now", ignore=skipped)
    return _import("pr_now", into)


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
    return package.Router(routes, budget=package.Budget("1000000")) if BUDGET else package.Router(routes)


async def _once(fn: Callable[[], Awaitable[Any]]) -> int:
    """One call's CPU on this thread outside `litellm.acompletion`, in ns."""
    INSIDE[0] = 0
    started = time.thread_time_ns()
    await fn()
    return time.thread_time_ns() - started - INSIDE[0]


async def _child(rev: str, calls: int, first: str) -> dict[str, float]:
    original = litellm.acompletion

    async def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time_ns()
        try:
            return await original(*args, **kwargs)
        finally:
            INSIDE[0] += time.thread_time_ns() - started

    litellm.acompletion = timed
    with tempfile.TemporaryDirectory() as folder, fake_in_child() as base:
        a, b = Path(folder) / "a", Path(folder) / "b"
        a.mkdir()
        b.mkdir()
        if first == "rev":
            then = _router(_at(rev, a), base)
            now = _router(_checkout(b), base)
        else:
            now = _router(_checkout(a), base)
            then = _router(_at(rev, b), base)
        plain = {"api_base": base, "api_key": KEY, "num_retries": 0, "max_retries": 0}
        variants: dict[str, Callable[[], Awaitable[Any]]] = {
            "plain": lambda: litellm.acompletion(model="openai/a", messages=MESSAGES, **plain),
            "rev": lambda: then.acompletion(model="g", messages=MESSAGES, **ASKED),
            "now": lambda: now.acompletion(model="g", messages=MESSAGES, **ASKED),
        }
        samples: dict[str, list[int]] = {name: [] for name in variants}
        for turn in range(calls + 30):  # the first 30: clients, caches, the lanes
            names = list(variants) if turn % 2 else list(variants)[::-1]
            for name in names:
                spent = await _once(variants[name])
                if turn >= 30:
                    samples[name].append(spent)
            if turn % 500 == 0:
                gc.collect()
    return {name: statistics.median(values) / 1e3 for name, values in samples.items()}


def main(rev: str, calls: int) -> None:
    runs = {}
    for first in ("rev", "now"):
        out = subprocess.run(
            [sys.executable, __file__, rev, str(calls), f"--first={first}", *(["--budget"] if BUDGET else [])],
            check=True, capture_output=True, text=True,
        ).stdout
        runs[first] = json.loads(out.strip().splitlines()[-1])
    print(f"CPU outside litellm.acompletion per call (loop thread, median of {calls} calls), "
          f"Router(routes{', budget=Budget(...)' if BUDGET else ''}), 3 routes:")
    for first, medians in runs.items():
        print(
            f"  {'REV' if first == 'rev' else 'this checkout'} imported first: plain "
            f"{medians['plain']:.1f} us, {rev} {medians['rev']:.1f} us, this checkout "
            f"{medians['now']:.1f} us: {medians['now'] - medians['rev']:+.1f} us"
        )
    one, other = (runs[f]["now"] - runs[f]["rev"] for f in ("rev", "now"))
    print(
        f"  this checkout - {rev}: {(one + other) / 2:+.1f} us a call "
        f"(the package imported second reads {abs(one - other) / 2:.1f} us apart)"
    )


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    given_rev = args[0] if args else "HEAD"
    given_calls = int(args[1]) if len(args) > 1 else 1500
    chosen = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--first=")]
    if chosen:
        print(json.dumps(asyncio.run(_child(given_rev, given_calls, chosen[0]))))
    else:
        main(given_rev, given_calls)
