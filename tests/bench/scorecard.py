"""The public failover scorecard (failoverbench, methodology v0.1), run on policy_router the
way its methodology runs a system: its own wall (the fake provider that breaks on purpose),
its own runner and checks, the `full` timing profile, one call per scenario streamed as its
runner streams, twenty for S15.

    FAILOVERBENCH=/path/to/failoverbench .venv/bin/python tests/bench/scorecard.py [--profile full|fast]

`FAILOVERBENCH` is a checkout of the public repository (it is not on the package index and
is not part of this project). This file is only the adapter its runner calls, and the two
configurations it scores:

- **baseline**: the methodology's baseline budget, everything else the router's default: one
  group, primary then fallback, `Route(timeout=30)`, `Retry(attempts=3, backoff=0.5)` (up to
  two retries), `deadline=` the scenario's `max_wall_s` (what the runner hands an adapter);
- **profile**: the README's failover profile: the baseline plus a first-token limit of 10 s,
  a stall limit of 5 s, a hedge, and a cut stream restarted on the next route (both wait out
  a Retry-After of up to 5 s on the preferred route: `Retry`'s default).

A full run of both takes five to six minutes (the scenarios' own timings: a 30 s silence
timed out, a 20 s first token, a 60 s outage sampled every 4 s, ...). It prints each
scenario's verdict, the two rows, and how long it took.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

CONFIGURATIONS = ("baseline", "profile")


def _checkout() -> Path:
    found = os.environ.get("FAILOVERBENCH")
    if not found or not (Path(found) / "failoverbench" / "runner.py").is_file():
        raise SystemExit("set FAILOVERBENCH to a checkout of the public failoverbench repository")
    return Path(found)


def _adapter_class() -> type:
    from failoverbench.adapters.base import Adapter, CallResult  # the checkout's own

    from policy_router import Hedge, Retry, Route, Router

    class PolicyRouterAdapter(Adapter):  # type: ignore[misc, valid-type]
        """policy_router in process: one router per (primary, fallback) pair, kept for the
        scenario, so a breaker's state lasts across S15's sequence."""

        name = "policy-router"
        capabilities: ClassVar[dict[str, bool]] = {"fallback": True, "streaming": True}

        async def start(self) -> None:
            self._routers: dict[tuple[str, str | None], Router] = {}
            self._shown: list[str] = []  # the text the caller shows of the call in hand

        def _router(self, primary: str, fallback: str | None, deadline: float) -> Router:
            key = (primary, fallback)
            if key not in self._routers:
                profile = self.params.get("configuration") == "profile"
                limits = {"first_token_timeout": 10.0, "stall_timeout": 5.0} if profile else {}
                routes = [
                    Route(f"openai/{model}", group="g", api_base=f"{self.wall_base}/v1",
                          api_key="failoverbench", timeout=30, capabilities={"streaming": True},
                          **limits)
                    for model in (primary, fallback) if model
                ]
                retry = Retry(attempts=3, backoff=0.5)  # a Retry-After up to 5 s waited out
                # A restarted stream starts again from scratch: the caller throws away what
                # it showed (the profile's `on_restart`), as the README's `discard` does.
                extra: dict[str, Any] = (
                    {"stream_failure": "restart", "on_restart": lambda restart: self._shown.clear(),
                     "hedge": Hedge(after="p95", otherwise=10)}
                    if profile else {}
                )
                self._routers[key] = Router(routes, retry=retry, deadline=deadline, **extra)
            return self._routers[key]

        async def complete(self, primary: str, fallback: str | None, stream: bool,
                           messages: list[dict[str, Any]], deadline_s: float) -> Any:
            router = self._router(primary, fallback, deadline_s)
            started = time.monotonic()

            def elapsed() -> float:
                return round(time.monotonic() - started, 3)

            parts: list[str] = []
            self._shown = parts
            usage, model, ttft, chunks = None, None, None, 0
            try:
                if stream:
                    response = await router.acompletion(
                        model="g", messages=messages, stream=True,
                        stream_options={"include_usage": True},
                    )
                    async for chunk in response:
                        chunks += 1
                        model = getattr(chunk, "model", None) or model
                        found = getattr(chunk, "usage", None)
                        if found:
                            usage = found.model_dump() if hasattr(found, "model_dump") else dict(found)
                        for choice in getattr(chunk, "choices", None) or []:
                            text = getattr(getattr(choice, "delta", None), "content", None)
                            if text:
                                ttft = ttft if ttft is not None else elapsed()
                                parts.append(text)
                    return CallResult(ok=True, content="".join(parts), reported_model=model,
                                      usage=usage, elapsed_s=elapsed(), ttft_s=ttft, chunks=chunks)
                answer = await router.acompletion(model="g", messages=messages)
                found = getattr(answer, "usage", None)
                return CallResult(ok=True, content=answer.choices[0].message.content or "",
                                  reported_model=getattr(answer, "model", None),
                                  usage=found.model_dump() if found is not None else None,
                                  elapsed_s=elapsed(), ttft_s=elapsed())
            except Exception as error:
                return CallResult(ok=False, status=getattr(error, "status_code", None),
                                  error=f"{type(error).__name__}: {str(error)[:300]}",
                                  elapsed_s=elapsed(), content="".join(parts),
                                  reported_model=model, usage=usage, ttft_s=ttft, chunks=chunks)

        async def close(self) -> None:
            for router in self._routers.values():
                await router.aclose()
            self._routers.clear()

    return PolicyRouterAdapter


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=("full", "fast"), default="full")
    parser.add_argument("--only", default="", help="scenario ids, e.g. S01,S07")
    args = parser.parse_args()
    checkout = _checkout()
    sys.path.insert(0, str(checkout))
    from failoverbench import adapters, runner

    adapter = _adapter_class()
    adapters.REGISTRY[adapter.name] = adapter
    port = _free_port()
    wall = subprocess.Popen(
        [sys.executable, "-m", "failoverbench.wall", "--host", "127.0.0.1", "--port", str(port),
         "--profile", args.profile],
        cwd=checkout, stderr=subprocess.DEVNULL,
    )
    only = {s.strip().upper() for s in args.only.split(",") if s.strip()} or None
    rows = {}
    started = time.monotonic()
    try:
        for _ in range(100):  # the wall is up when it answers
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.1):
                break
            time.sleep(0.05)
        with tempfile.TemporaryDirectory() as out:
            for configuration in CONFIGURATIONS:
                system = Path(out) / f"policy-router-{configuration}.yaml"
                system.write_text(
                    f"name: policy-router-{configuration}\nadapter: policy-router\n"
                    f"params: {{configuration: {configuration}}}\n"
                )
                print(f"policy_router, {configuration}:", flush=True)
                path = asyncio.run(runner.run_system(
                    str(system), str(checkout / "scenarios" / "catalogue.yaml"),
                    f"http://127.0.0.1:{port}", args.profile, only, out,
                ))
                import json

                rows[configuration] = json.loads(Path(path).read_text())["summary"]
    finally:
        wall.terminate()
        wall.wait(10)
    print("\n| policy_router | pass | partial | safe | fail |\n| --- | --- | --- | --- | --- |")
    for configuration, s in rows.items():
        print(f"| {configuration} | {s['pass']} | {s['partial']} | {s['safe']} | {s['fail']} |")
    print(f"\n{len(rows)} configuration(s), {args.profile} timings, in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
