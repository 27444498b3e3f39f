"""What the server costs beside the bare floor (and the LiteLLM proxy): requests a second,
CPU per request and p99 latency at concurrency 1, 16 and 64, whole and streamed answers.

Run: `.venv/bin/python tests/bench/server.py [--requests 200] [--rounds 3] [--processes 3]
[--litellm-proxy /path/to/venv/bin/litellm] [--side-by-side-rounds 6]`.

Targets, each a real server process on loopback in front of one FakeProvider (in a child
process of its own), all started at once and measured in interleaved rounds:

- `floor`: `litellm.acompletion` in a Starlette handler under uvicorn, nothing else
  (`tests/bench/_floor.py`): what any gateway over LiteLLM costs at least;
- `policy-router`: `policy-router serve`, one key, no budget, no breaker;
- `policy-router, budget+breaker`: the same with a budget and the default breaker;
- `policy-router --workers 2`: no budget, two workers over a SQLite store (both cores);
- `litellm proxy` when `--litellm-proxy` names its command (it installs here only at
  1.108.7, in a virtualenv of its own).

The client is aiohttp in this process with a connection pool as large as the
concurrency. Each one-worker server is pinned to core 0 and this process to core 1, as a
gateway given one core would run; the two-worker server gets both. CPU is the server's
process tree's (user + system, from /proc), divided by the requests it answered; the
client's and the provider's are not counted. Every target runs as `--processes` processes
of its own (see `targets`), measured in turn; figures are the median over its processes and
the rounds, with their spread: a shared 2-core machine. Then (`side_by_side`) every one-core
process is loaded at once, for CPU ratios to the floor that share the machine's state.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import aiohttp
import httpx
import yaml
from _fake import MESSAGES, fake_in_child

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-bench-gateway"
CONCURRENCY = (1, 16, 64)


_GIVEN: set[int] = set()


def _port() -> int:
    """A free port on loopback, never one this bench gave a target already. The port is
    free when asked but only bound when its server has started, seconds later: the system
    can hand it out again meanwhile, and two targets on one port measure one process's
    CPU twice and a dead one's as zero (a run read 0.00 ms a request for a process whose
    requests another target had answered)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


def _tree(pid: int) -> list[int]:
    found = [pid]
    with contextlib.suppress(OSError):
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            found += _tree(int(child))
    return found


def _cpu(pid: int) -> float:
    """CPU seconds used by `pid` and its descendants; `SystemExit` when `pid` itself is
    gone, rather than a figure of zero (a child that ended is simply not counted)."""
    total = 0.0
    for p in _tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            if p == pid:
                raise SystemExit(f"the target process {pid} is gone: its CPU cannot be read") from None
            continue
        if p == pid and fields[0] == "Z":
            raise SystemExit(f"the target process {pid} has exited: its CPU is no longer counted")
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _policy(base: str, *, budget: bool, store: str | None) -> dict[str, Any]:
    route = {"model": "openai/a", "api_base": base, "api_key": "os.environ/BENCH_PROVIDER_KEY",
             "capabilities": {"tools": True, "streaming": True}, "prices": "bench"}
    found: dict[str, Any] = {
        "name": "gateway-bench",
        "groups": {"g": {"routes": [route]}},
        "price_tables": {"bench": {"currency": "USD", "as_of": "2026-12-01", "source": "bench",
                                   "models": {"openai/a": {"input": "0.15", "output": "0.60"}}}},
    }
    if budget:
        found["budget"] = {"cap": "100000.00"}
    else:
        found["breaker"] = False
    if store is not None:
        found["store"] = store
    return found


class Target:
    def __init__(self, name: str, argv: list[str], port: int, *, pin: bool, alive: str = "/health") -> None:
        self.name, self.port, self.pin, self.alive = name, port, pin, alive
        env = {**os.environ, "POLICY_ROUTER_API_KEY": KEY, "BENCH_PROVIDER_KEY": "sk-bench",
               "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if pin:
            os.sched_setaffinity(self.proc.pid, {0})
        self.url = f"http://127.0.0.1:{port}"

    def wait(self) -> None:
        for _ in range(1200):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}{self.alive}", timeout=1).status_code == 200:
                    return
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited with {self.proc.returncode}")
            time.sleep(0.1)
        raise SystemExit(f"{self.name} did not start")

    def stop(self) -> None:
        self.proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(20)
        if self.proc.poll() is None:
            self.proc.kill()


def _policy_file(path: Path, base: str, **kw: Any) -> str:
    path.write_text(yaml.safe_dump(_policy(base, **kw)))
    return str(path)


@contextlib.contextmanager
def targets(base: str, tmp: Path, proxy: str | None, copies: int) -> Iterator[list[Target]]:
    """`copies` processes of every target, each with a policy file (and so a state file)
    of its own. One process of a server is not a sample of it: identical processes of one
    target differ by up to ~20% in CPU a request, steadily over a run (where the hash
    seed and the address layout put what each request touches), so a target is read over
    several."""
    serve = [sys.executable, "-m", "policy_router", "serve"]
    made = []
    try:
        for copy in range(copies):
            plain = _policy_file(tmp / f"plain-{copy}.yaml", base, budget=False, store=None)
            budgeted = _policy_file(tmp / f"budgeted-{copy}.yaml", base, budget=True, store=None)
            shared = _policy_file(
                tmp / f"workers-{copy}.yaml", base, budget=False, store=f"sqlite:///{tmp / f'workers-{copy}.sqlite'}"
            )
            specs = [
                ("floor", [sys.executable, str(ROOT / "tests" / "bench" / "_floor.py"), "{port}", base], True),
                ("policy-router", [*serve, plain, "--port", "{port}", "--workers", "1"], True),
                ("policy-router, budget+breaker", [*serve, budgeted, "--port", "{port}", "--workers", "1"], True),
                ("policy-router --workers 2", [*serve, shared, "--port", "{port}", "--workers", "2"], False),
            ]
            if proxy is not None:
                config = tmp / "proxy.yaml"
                config.write_text(yaml.safe_dump({
                    "model_list": [{"model_name": "g", "litellm_params": {"model": "openai/a", "api_base": base, "api_key": "sk-bench"}}],
                    "general_settings": {"master_key": KEY},
                }))
                specs.append(("litellm proxy", [proxy, "--config", str(config), "--port", "{port}", "--num_workers", "1"], True))
            for name, argv, pin in specs:
                port = _port()
                alive = "/health/liveliness" if name == "litellm proxy" else "/health"
                made.append(Target(name, [a.replace("{port}", str(port)) for a in argv], port, pin=pin, alive=alive))
        for target in made:
            target.wait()
        yield made
    finally:
        for target in made:
            target.stop()


async def _load(url: str, requests: int, concurrency: int, stream: bool) -> list[float]:
    """`requests` chat calls, `concurrency` at a time; each one's seconds."""
    body = {"model": "g", "messages": MESSAGES, **({"stream": True} if stream else {})}
    headers = {"Authorization": f"Bearer {KEY}"}
    left = iter(range(requests))
    seconds: list[float] = []
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, headers=headers) as http:
        async def worker() -> None:
            for _ in left:
                started = time.perf_counter()
                async with http.post(f"{url}/v1/chat/completions", json=body) as answer:
                    await answer.read()
                    if answer.status != 200:
                        raise SystemExit(f"{url}: {answer.status} {(await answer.text())[:200]}")
                seconds.append(time.perf_counter() - started)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return seconds


def measure(target: Target, requests: int, concurrency: int, stream: bool) -> tuple[float, float, float]:
    """Requests a second, CPU ms a request and p99 ms of one batch."""
    cpu, wall = _cpu(target.proc.pid), time.perf_counter()
    seconds = asyncio.run(_load(target.url, requests, concurrency, stream))
    wall, cpu = time.perf_counter() - wall, _cpu(target.proc.pid) - cpu
    p99 = statistics.quantiles(seconds, n=100)[98] if len(seconds) >= 2 else seconds[0]
    return requests / wall, cpu / requests * 1e3, p99 * 1e3


async def _side_by_side(made: list[Target], requests: int, concurrency: int) -> dict[str, float]:
    """Every target loaded at once (`requests` whole answers each, `concurrency` at a
    time): its CPU ms a request over the floor's in the same seconds (the floor's mean
    over its processes)."""
    before = {id(t): _cpu(t.proc.pid) for t in made}
    await asyncio.gather(*(_load(t.url, requests, concurrency, False) for t in made))
    cpu = {id(t): (_cpu(t.proc.pid) - before[id(t)]) / requests * 1e3 for t in made}
    floor = statistics.mean(cpu[id(t)] for t in made if t.name == "floor")
    found: dict[str, list[float]] = {}
    for t in made:
        found.setdefault(t.name, []).append(cpu[id(t)] / floor)
    return {name: statistics.mean(v) for name, v in found.items()}


def side_by_side(made: list[Target], requests: int, rounds: int) -> list[str]:
    """CPU a request over the floor's, measured with the targets side by side.

    The table's figures come from each target measured in turn, and this machine's speed
    moves by tens of percent from one batch to the next (a shared host): a ratio of two
    batches carries that. Here every one-core target runs at once on the same core, so
    each round's ratios share the machine's state, and the rounds' spread is the
    measurement's own. The targets share the core's caches too, as no gateway given its
    own core would; the ratios, not the absolute figures, are the point."""
    pinned = [t for t in made if t.pin]
    lines = [
        f"\nSide by side: whole answers, every one-core process loaded at once ({requests} requests each), "
        f"{rounds} rounds; CPU a request over the floor's in the same round, median (min-max):"
    ]
    for concurrency in CONCURRENCY:
        asyncio.run(_side_by_side(pinned, 30, concurrency))  # warm at this concurrency
        ratios: dict[str, list[float]] = {}
        for _ in range(rounds):
            for name, ratio in asyncio.run(_side_by_side(pinned, requests, concurrency)).items():
                ratios.setdefault(name, []).append(ratio)
        line = ", ".join(
            f"{name} {statistics.median(v):.3f}x ({min(v):.3f}-{max(v):.3f})" for name, v in ratios.items() if name != "floor"
        )
        lines.append(f"- c={concurrency}: {line}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--processes", type=int, default=3, help="processes of each target")
    parser.add_argument("--litellm-proxy", default=None)
    parser.add_argument("--side-by-side-rounds", type=int, default=6, help="rounds of the side-by-side CPU ratios (0: none)")
    args = parser.parse_args()
    os.sched_setaffinity(0, {1})
    results: dict[tuple[str, str, int], list[tuple[float, float, float]]] = {}
    by_process: dict[tuple[str, int, int], list[float]] = {}  # whole answers' CPU, by process
    with fake_in_child() as base, tempfile.TemporaryDirectory() as tmp, targets(
        base, Path(tmp), args.litellm_proxy, args.processes
    ) as made:
        for target in made:  # warm: connections, LiteLLM's clients, caches
            for stream in (False, True):
                measure(target, 50, 16, stream)
        for _ in range(args.rounds):
            for stream in (False, True):
                for concurrency in CONCURRENCY:
                    for target in made:
                        mode = "streamed" if stream else "whole"
                        got = measure(target, args.requests, concurrency, stream)
                        results.setdefault((target.name, mode, concurrency), []).append(got)
                        if not stream:
                            by_process.setdefault((target.name, target.port, concurrency), []).append(got[1])
        paired = side_by_side(made, args.requests, args.side_by_side_rounds) if args.side_by_side_rounds else []
    names = list(dict.fromkeys(t.name for t in made))
    print(
        f"{args.rounds} interleaved rounds x {args.requests} chat requests per process, mode and concurrency; "
        f"{args.processes} processes of each target"
    )
    print("| target | answers | c | requests/s | CPU ms/request | p99 ms | vs floor: CPU, throughput |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for mode in ("whole", "streamed"):
        for concurrency in CONCURRENCY:
            floor = results[("floor", mode, concurrency)]
            floor_rps = statistics.median(r[0] for r in floor)
            floor_cpu = statistics.median(r[1] for r in floor)
            for name in names:
                rows = results[(name, mode, concurrency)]
                rps = [r[0] for r in rows]
                cpu = [r[1] for r in rows]
                p99 = [r[2] for r in rows]
                print(
                    f"| {name} | {mode} | {concurrency} | {statistics.median(rps):.0f} ({min(rps):.0f}-{max(rps):.0f}) "
                    f"| {statistics.median(cpu):.2f} ({min(cpu):.2f}-{max(cpu):.2f}) | {statistics.median(p99):.1f} "
                    f"| {statistics.median(cpu) / floor_cpu:.2f}x, {statistics.median(rps) / floor_rps:.2f}x |"
                )
    print("\nWhole answers, each process's median CPU a request over the floor's (all its processes):")
    for name in names:
        line = []
        for concurrency in CONCURRENCY:
            floor_cpu = statistics.median(r[1] for r in results[("floor", "whole", concurrency)])
            each = sorted(
                statistics.median(v) / floor_cpu for (n, _, c), v in by_process.items() if n == name and c == concurrency
            )
            line.append(f"c={concurrency} " + " ".join(f"{x:.2f}x" for x in each))
        print(f"- {name}: " + "; ".join(line))
    print("\n".join(paired))


if __name__ == "__main__":
    main()
