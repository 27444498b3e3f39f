"""What a served request costs in instructions, beside the bare floor: a count that does
not move with the machine, for weighing a change to the server's hot path.

Run: `.venv/bin/python tests/bench/instructions.py [--requests 20] [--canned]` (needs
`valgrind`: `apt-get install valgrind`).

CPU time a request moves by ±10% from one batch to the next on a shared machine, and by
up to 20% from one process of a server to another (`server.py` says why), so a change of
1-3% cannot be told from noise in time. The instructions a request executes can: each
target runs in a process of its own under callgrind (`--instr-atstart=no`), its app
called in process through ASGI (no HTTP parsing, which every target shares), and only
the measured requests are counted, after a warm-up. Targets: `floor` (`_floor.py`),
`policy-router` (no budget, no breaker) and `policy-router, budget+breaker` (the SQLite
store), each in front of one FakeProvider in a child process.

`--canned` answers every request with one answer made before (LiteLLM is not called):
what is left is each server's own layer, around the call.

Instructions are not time: they leave out the kernel (a SQLite commit's writes) and how
well the caches serve the code (a request's own code runs cold after LiteLLM's, and slower
for it). Read them for a change's direction and size; `server.py` measures the cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _fake import MESSAGES, fake_in_child

KEY = "sk-bench-gateway"
TARGETS = ("floor", "policy-router", "policy-router, budget+breaker")
BODY = json.dumps({"model": "g", "messages": MESSAGES}).encode()
WARM = 30


async def _request(app: Any) -> None:
    """One chat request through `app` as uvicorn would hand it over."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions", "query_string": b"", "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                    (b"authorization", f"Bearer {KEY}".encode()), (b"content-length", str(len(BODY)).encode())],
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
    }
    read, answered = False, asyncio.Event()
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        if not read:
            read = True
            return {"type": "http.request", "body": BODY, "more_body": False}
        await answered.wait()  # the client stays until its answer is sent
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, receive, send)
    answered.set()
    if status != [200]:
        raise SystemExit(f"the target answered {status}")


async def _app(target: str, base: str, tmp: Path, canned: bool) -> Any:
    if target == "floor":
        import litellm
        from _floor import app as floor_app

        if canned:
            made = await litellm.acompletion(model="openai/a", api_base=base, api_key="sk-bench", messages=MESSAGES)

            async def answer(**_: Any) -> Any:
                return made

            litellm.acompletion = answer
        return floor_app(base)
    import yaml
    from server import _policy

    from policy_router.server.app import create_app

    os.environ.update(POLICY_ROUTER_API_KEY=KEY, BENCH_PROVIDER_KEY="sk-bench")
    path = tmp / "policy.yaml"
    path.write_text(yaml.safe_dump(_policy(base, budget=target != "policy-router", store=None)))
    app = create_app(path)
    if canned:
        tenant = app.state.tenants.find(f"Bearer {KEY}")
        made = await tenant.router.aroute(endpoint="chat", scope=tenant.scope, model="g", messages=MESSAGES, on_device=False)

        async def routed(**_: Any) -> Any:
            return made

        tenant.router.aroute = routed
    return app


def _callgrind(*args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True, capture_output=True)


async def _measured(target: str, requests: int, canned: bool) -> None:
    """In the process under callgrind: warm, then count `requests` requests only."""
    with fake_in_child() as base, tempfile.TemporaryDirectory() as tmp:
        app = await _app(target, base, Path(tmp), canned)
        for _ in range(WARM):
            await _request(app)
        _callgrind("--instr=on")
        for _ in range(5):  # the instrumented code's first runs
            await _request(app)
        _callgrind("--zero")
        for _ in range(requests):
            await _request(app)
        _callgrind("--dump")
        _callgrind("--instr=off")


def _count(target: str, requests: int, canned: bool) -> float:
    """Instructions a request for `target`, from a callgrind run of its own."""
    with tempfile.TemporaryDirectory() as out:
        argv = [
            "valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}/cg.%p",
            sys.executable, os.path.abspath(__file__), "--as", target, "--requests", str(requests),
            *(["--canned"] if canned else []),
        ]
        run = subprocess.run(argv, capture_output=True, text=True)
        if run.returncode != 0:
            raise SystemExit(f"{target}: callgrind failed:\n{run.stderr[-2000:]}")
        dumps = [p for p in Path(out).iterdir() if re.fullmatch(r"cg\.\d+\.\d+", p.name)]
        if len(dumps) != 1:
            raise SystemExit(f"{target}: expected one dump of the measured requests, found {len(dumps)}")
        totals = re.search(r"^(?:summary|totals): (\d+)", dumps[0].read_text(), re.MULTILINE)
        if totals is None:
            raise SystemExit(f"{target}: no totals in {dumps[0].name}")
        return int(totals.group(1)) / requests


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--canned", action="store_true", help="one answer made before: the servers' own layers")
    parser.add_argument("--as", dest="role", choices=TARGETS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role is not None:
        asyncio.run(_measured(args.role, args.requests, args.canned))
        return
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("this bench needs valgrind (apt-get install valgrind)")
    counts = {target: _count(target, args.requests, args.canned) for target in TARGETS}
    what = "the server's own layer (a canned answer)" if args.canned else "whole requests through LiteLLM"
    print(f"Instructions a request, {args.requests} requests each, {what}:")
    print("| target | instructions a request | vs floor |")
    print("| --- | --- | --- |")
    for target, count in counts.items():
        print(f"| {target} | {count:,.0f} | {count / counts['floor']:.3f}x (+{count - counts['floor']:,.0f}) |")


if __name__ == "__main__":
    main()
