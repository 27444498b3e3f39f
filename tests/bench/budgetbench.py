"""The budget bench: are budgets ever passed? Concurrent mixed calls through two
`policy-router serve` processes on one store, over server, team, key, user, tag and route
scopes, while the run is made hard on purpose; then, for every scope's account in every
period: spent <= cap, and how many calls were refused that would have fit.

Run: `.venv/bin/python tests/bench/budgetbench.py [calls] [clients]` (both stores), or add
`--store sqlite` / `--store redis`.

What the run throws at the budgets, all at once: calls with no reply cap to a route whose
output limit is declared, calls with tools, `n=2`, streams the client drops after the first
chunk, the openai SDK's own retries against a route failing 503, hedged calls, a server
process killed (SIGKILL) with calls in flight and started again, the other server restarted
mid-period, a store outage (Redis stopped and started; SQLite has no outage to simulate),
and a period boundary crossed mid-burst (the server's and the users' budgets reset every 6
seconds). "Would have fit" is an estimate, the price of reserving the worst case: a refused
call whose scope ended its period with room for a typical answered call of its kind.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import httpx
import openai
import yaml

from policy_router.testing import Fail, FakeProvider, Hang

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"alice": "sk-bench-alice", "bob": "sk-bench-bob", "carol": "sk-bench-carol"}
ADMIN = "sk-bench-ops"
CAPS = {"tools": True, "streaming": True}
WINDOW = 6  # seconds: the server's and the users' periods, crossed mid-burst

PEERS = [
    ("Cloudflare AI Gateway", "eventually consistent: a burst of concurrent requests can briefly exceed the limit"),
    ("Anthropic's gateway (coding tools)", "answers 429 on the next request after the cap is passed"),
    ("LiteLLM proxy", "budgets require a database; without one they are not enforced"),
    ("Bifrost", "customer, team, virtual key and provider budgets, reset 1m to 1y (no promise under concurrency found)"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def policy(fake: FakeProvider, store: Any) -> dict[str, Any]:
    def route(model: str, **kw: Any) -> dict[str, Any]:
        return {"model": f"openai/{model}", "api_base": fake.base_url, "api_key": "os.environ/PROVIDER_KEY",
                "prices": "mine", "capabilities": CAPS, **kw}

    return {
        "name": "budgetbench",
        "groups": {
            "smart": {"routes": [route("prime", output_limit=200, id="prime"), route("spare", output_limit=200)]},
            "hedged": {"routes": [route("slowish", output_limit=200), route("spare", output_limit=200)],
                       "hedge": {"after": 0.05}},
        },
        "price_tables": {"mine": {"currency": "USD", "as_of": "2026-12-01", "source": "bench", "models": {
            f"openai/{m}": {"input": "500", "output": "1000"} for m in ("prime", "spare", "slowish")}}},
        "budget": {"cap": "3.00", "period": WINDOW},
        "budgets": [
            {"cap": "0.40", "period": WINDOW, "per": "user"},
            {"cap": "1.20", "tag": "batch"},
            {"cap": "1.50", "route": "prime", "period": "day"},
        ],
        "store": store,
        "server": {
            "teams": {"search": {"budget": {"cap": "2.00", "period": "month"}}},
            "keys": {
                "alice": {"key": "os.environ/ALICE_KEY", "team": "search", "budget": {"cap": "1.00", "period": "day"}},
                "bob": {"key": "os.environ/BOB_KEY", "team": "search"},
                "carol": {"key": "os.environ/CAROL_KEY", "budget": {"cap": "0.80"}},
            },
            "admin_keys": {"ops": {"key": "os.environ/OPS_KEY"}},
        },
    }


class Server:
    def __init__(self, path: Path) -> None:
        self.path, self.port, self.proc = path, free_port(), None
        self.env = {**os.environ, "PROVIDER_KEY": "sk-bench-provider", "OPS_KEY": ADMIN,
                    **{f"{n.upper()}_KEY": k for n, k in KEYS.items()}, "PYTHONPATH": str(ROOT)}

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "policy_router", "serve", str(self.path), "--port", str(self.port), "--workers", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert "serving" in line, line
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()  # drain its output

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def one_call(base: str, key: str, i: int, rng: random.Random) -> tuple[str, str, str | None]:
    """One mixed call; (kind, outcome, refusing scope)."""
    kind = rng.choice(["plain", "tools", "n2", "dropped-stream", "retried", "hedged", "batch"])
    user = f"u{i % 7}"
    sdk = openai.OpenAI(base_url=base, api_key=key, max_retries=2 if kind == "retried" else 0, timeout=30)
    extra: dict[str, Any] = {"user": user}
    messages = [{"role": "user", "content": f"Say hello, number {i}."}]
    try:
        if kind == "plain":
            sdk.chat.completions.create(model="smart", messages=messages, **extra)  # type: ignore[arg-type]
        elif kind == "tools":
            tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
            sdk.chat.completions.create(model="smart", messages=messages, tools=tools, max_tokens=40, **extra)  # type: ignore[arg-type]
        elif kind == "n2":
            sdk.chat.completions.create(model="smart", messages=messages, n=2, max_tokens=30, **extra)  # type: ignore[arg-type]
        elif kind == "dropped-stream":
            stream = sdk.chat.completions.create(model="smart", messages=messages, stream=True, max_tokens=60, **extra)  # type: ignore[arg-type]
            next(iter(stream), None)
            stream.close()
        elif kind == "retried":
            sdk.chat.completions.create(model="smart", messages=messages, max_tokens=30, **extra)  # type: ignore[arg-type]
        elif kind == "hedged":
            sdk.chat.completions.create(model="hedged", messages=messages, max_tokens=30, **extra)  # type: ignore[arg-type]
        else:
            sdk.chat.completions.create(model="smart", messages=messages, max_tokens=30,
                                        extra_headers={"x-policy-router-tags": "batch"}, **extra)  # type: ignore[arg-type]
        return kind, "answered", None
    except openai.RateLimitError as error:
        said = re.search(r"budget ((?:user|tag|key|team|route|provider):\S+)", str(error))
        return kind, "refused", f"{said.group(1) if said else 'all'}@{time.time():.3f}"
    except (openai.APIError, httpx.HTTPError, OSError) as error:
        return kind, f"failed: {getattr(error, 'status_code', None) or type(error).__name__}", None


def run(store_kind: str, calls: int, clients: int) -> list[dict[str, Any]]:
    rng = random.Random(7)
    with FakeProvider() as fake, tempfile.TemporaryDirectory() as tmp:
        redis_server = None
        if store_kind == "redis":
            from tests._redis import RedisServer

            redis_server = RedisServer(persist=True)  # an outage, not a loss of what it holds
            redis_server.start()
            store: Any = {"redis": redis_server.url, "namespace": "budgetbench"}
        else:
            store = {"sqlite": str(Path(tmp) / "state.sqlite"), "lease": 4}
        path = Path(tmp) / "policy.yaml"
        path.write_text(yaml.safe_dump(policy(fake, store)))
        fake.responder = lambda _path, body: (
            Fail(503) if body.get("model") == "prime" and rng.random() < 0.15
            else Hang(0.2) if body.get("model") == "slowish" else None
        )
        servers = [Server(path), Server(path)]
        for s in servers:
            s.start()
        outcomes: list[tuple[str, str, str | None]] = []
        lock = threading.Lock()
        counter = iter(range(calls))

        def client(n: int) -> None:
            local = random.Random(n)
            for i in counter:
                key = KEYS[("alice", "bob", "carol")[i % 3]]
                got = one_call(servers[i % 2].base, key, i, local)
                if got[1] == "failed: APIConnectionError":  # as a balancer would: the other server
                    got = one_call(servers[(i + 1) % 2].base, key, i, local)
                with lock:
                    outcomes.append(got)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
        started = time.monotonic()
        for t in threads:
            t.start()
        time.sleep(2.0)
        servers[0].kill()  # calls in flight on it: their reservations are held by no one now
        time.sleep(0.5)
        servers[0].start()
        if redis_server is not None:
            time.sleep(1.0)
            redis_server.stop()  # an outage: every budget refuses, nothing is let through
            time.sleep(1.5)
            redis_server.start()
        time.sleep(1.0)
        servers[1].stop()  # a restart mid-period
        servers[1].start()
        for t in threads:
            t.join()
        took = time.monotonic() - started
        time.sleep(5)  # past the SQLite lease: a killed process's holds are charged now
        accounts = read_accounts(servers[0].base, store_kind, path)
        for s in servers:
            s.stop()
        if redis_server is not None:
            redis_server.stop()
        return summarize(store_kind, accounts, outcomes, took, fake)


def read_accounts(base: str, store_kind: str, path: Path) -> list[dict[str, Any]]:
    """Every account of every period: the store's own view (past periods included)."""
    from policy_router.config.policy_file import load
    from policy_router.server.tenants import budgets_of, store_of

    loaded = load(path)
    store = store_of(loaded)
    view = store.bind("budgetbench", __import__("policy_router").MonotonicClock(), lambda _: None)
    caps = {b.scope if b.value is not None or b.kind == "all" else f"{b.kind}:": b.cap.micros
            for b in [loaded.policies["budget"], *budgets_of(loaded)]}
    rows = []
    for name in sorted(view.budget_accounts()):
        scope = name.partition("@")[0].replace("budget", "all", 1) if name.startswith("budget") else name.partition("@")[0]
        cap = caps.get(scope, caps.get(scope.split(":")[0] + ":"))
        state = view.spend_state(name)
        rows.append({"account": name, "scope": scope, "cap": cap, "spent": state.spent,
                     "reserved": state.reserved, "held": state.holding})
    close = getattr(store, "close", None)
    if close is not None:
        close()
    return rows


def summarize(store: str, accounts: list[dict[str, Any]], outcomes: list[tuple[str, str, str | None]], took: float, fake: FakeProvider) -> list[dict[str, Any]]:
    """Per scope (each user's accounts together): spent <= cap in every account of every
    period, what stayed held, the calls it refused, and of those how many its account had
    room for at the end of that period (a typical answered call, $0.02): the price of
    reserving the worst case rather than the cost."""
    typical = 20_000  # micro-units
    by_account = {r["account"]: r for r in accounts}
    refusals: dict[str, list[bool]] = defaultdict(list)
    for _, outcome, said in outcomes:
        if outcome != "refused" or said is None:
            continue
        scope, _, at = said.partition("@")
        account = _account_at(scope, float(at), by_account)
        room = account is not None and account["cap"] - account["spent"] >= typical
        refusals[_group(scope)].append(room)
    by_scope: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in accounts:
        by_scope[_group(row["scope"])].append(row)
    table = []
    for scope, rows in sorted(by_scope.items()):
        table.append({
            "store": store, "scope": scope, "accounts": len(rows),
            "max spent/cap": f"{max(r['spent'] / r['cap'] for r in rows if r['cap']):.3f}",
            "never passed": all(r["spent"] <= r["cap"] for r in rows),
            "held at end": sum(r["held"] for r in rows),
            "refused": len(refusals[scope]),
            "refused, would have fit": sum(refusals[scope]),
        })
    answered = Counter(kind for kind, outcome, _ in outcomes if outcome == "answered")
    failed = Counter(f"{kind} {outcome[8:]}" for kind, outcome, _ in outcomes if outcome.startswith("failed"))
    print(f"\n{store}: {len(outcomes)} calls in {took:.1f} s: {sum(answered.values())} answered "
          f"({dict(answered)}), {sum(len(v) for v in refusals.values())} refused, {sum(failed.values())} failed "
          f"({dict(failed)}); provider requests {fake.requests()}")
    return table


def _group(scope: str) -> str:
    return "user:*" if scope.startswith("user:") else scope


def _account_at(scope: str, at: float, accounts: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The account `scope` was refused from at `at`: its window's, for a periodic one."""
    base = "budget" if scope == "all" else scope
    if base in accounts:
        return accounts[base]
    start = int(at // WINDOW * WINDOW)
    for name, row in accounts.items():
        if name.startswith(f"{base}@") and (name.endswith(f":{start}") or not name.startswith(f"{base}@every")):
            return row
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("calls", nargs="?", type=int, default=600)
    parser.add_argument("clients", nargs="?", type=int, default=16)
    parser.add_argument("--store", choices=["sqlite", "redis", "both"], default="both")
    args = parser.parse_args()
    rows = []
    for kind in (["sqlite", "redis"] if args.store == "both" else [args.store]):
        rows += run(kind, args.calls, args.clients)
    head = list(rows[0])
    widths = [max(len(str(r[h])) for r in [dict(zip(head, head, strict=True)), *rows]) for h in head]
    print()
    for r in [dict(zip(head, head, strict=True)), *rows]:
        print("  ".join(str(r[h]).ljust(w) for h, w in zip(head, widths, strict=True)))
    print("\nWhat peers document:")
    for name, said in PEERS:
        print(f"  {name}: {said}")
    print(json.dumps({"all scopes never passed": all(r["never passed"] for r in rows)}))


if __name__ == "__main__":
    main()
