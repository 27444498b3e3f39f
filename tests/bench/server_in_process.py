"""What the server adds to a request: latency and CPU per request through `policy-router
serve`, beside the same router called in-process, in one run.

Run: `.venv/bin/python tests/bench/server_in_process.py [requests] [rounds]`.

FakeProvider runs in a child process; the server is a real `policy-router serve` process
on loopback, called over one kept-alive HTTP connection (httpx, as the OpenAI SDK is
built on). Per round, alternately: `requests` calls to the router in this process
(`router.acompletion`, one event loop), and `requests` calls to the server. Latency is the
caller's wall time per request; CPU is the CPU of the process that routes (this process's
for the in-process calls, the server process's, read from /proc, for the served ones), so
the served figure includes LiteLLM's call, the HTTP parsing and the JSON both ways. The
median round is reported with the spread of the rounds: this is a shared 2-core machine,
and the client's own CPU competes with the server's for it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("BENCH_PROVIDER_KEY", "sk-bench")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import httpx
import yaml
from _fake import MESSAGES, fake_in_child

from policy_router import Router

ROOT = Path(__file__).resolve().parents[2]
SERVER_KEY = "sk-bench-server"


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _policy(base: str) -> dict[str, object]:
    routes = [
        {"model": f"openai/{n}", "api_base": base, "api_key": "os.environ/BENCH_PROVIDER_KEY",
         "capabilities": {"tools": True, "streaming": True}}
        for n in "abc"
    ]
    return {"name": "bench", "groups": {"g": {"routes": routes}}}


def main(requests: int = 200, rounds: int = 5) -> None:
    with fake_in_child() as base, tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "policy.yaml"
        path.write_text(yaml.safe_dump(_policy(base)))
        router = Router.from_config(path)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {**os.environ, "POLICY_ROUTER_API_KEY": SERVER_KEY, "PYTHONPATH": str(ROOT)}
        server = subprocess.Popen(
            [sys.executable, "-m", "policy_router", "serve", str(path), "--port", str(port)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            with httpx.Client(headers={"Authorization": f"Bearer {SERVER_KEY}"}, timeout=30) as http:
                for _ in range(300):
                    try:
                        if http.get(f"{url}/health").status_code == 200:
                            break
                    except httpx.HTTPError:
                        time.sleep(0.1)
                body = {"model": "g", "messages": MESSAGES}
                loop = asyncio.new_event_loop()

                async def local_batch() -> None:
                    for _ in range(requests):
                        await router.acompletion(model="g", messages=MESSAGES)

                def served_batch() -> None:
                    for _ in range(requests):
                        answer = http.post(f"{url}/v1/chat/completions", json=body)
                        answer.raise_for_status()

                served_batch()  # warm both: connections, LiteLLM's clients, caches
                loop.run_until_complete(local_batch())
                rows: list[tuple[float, float, float, float]] = []
                for _ in range(rounds):
                    wall, cpu = time.perf_counter(), time.process_time()
                    loop.run_until_complete(local_batch())
                    local_wall = (time.perf_counter() - wall) / requests
                    local_cpu = (time.process_time() - cpu) / requests
                    wall, cpu = time.perf_counter(), _cpu_of(server.pid)
                    served_batch()
                    served_wall = (time.perf_counter() - wall) / requests
                    served_cpu = (_cpu_of(server.pid) - cpu) / requests
                    rows.append((local_wall, served_wall, local_cpu, served_cpu))
                loop.close()
        finally:
            server.terminate()
            server.wait(10)
            router.close()

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1e3:.2f} ms ({min(values) * 1e3:.2f}-{max(values) * 1e3:.2f})"

    local_wall, served_wall, local_cpu, served_cpu = (list(c) for c in zip(*rows, strict=True))
    added = [s - w for w, s in zip(local_wall, served_wall, strict=True)]
    ratio = [s / c for c, s in zip(local_cpu, served_cpu, strict=True)]
    print(f"{rounds} rounds x {requests} chat requests, 3-route group, breaker on (defaults)")
    print(f"latency   in-process {ms(local_wall)}   served {ms(served_wall)}   added {ms(added)}")
    print(f"CPU/req   in-process {ms(local_cpu)}   server process {ms(served_cpu)}")
    print(f"server CPU / in-process CPU: {statistics.median(ratio):.2f}x ({min(ratio):.2f}-{max(ratio):.2f})")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
