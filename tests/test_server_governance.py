"""Governance on the server: a team's policy file end to end. Keys in teams, a server-wide
monthly cap, a daily cap per end user, admin keys that read every scope and set caps live,
a key that reads only its own, thresholds POSTed to a webhook, and the state kept in a
SQLite file across a restart. A real server process on loopback; the openai SDK as client."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml

from policy_router.testing import FakeProvider

from .conftest import KEY_PREFIX
from .test_server import MESSAGES, ROOT, _free_port

ALICE, BOB, OPS = "sk-alice-key-1", "sk-bob-key-2", "sk-ops-admin-3"


def team_policy(fake: FakeProvider, hook: str) -> dict[str, Any]:
    caps = {"tools": True, "streaming": True}
    return {
        "name": "acme",
        "groups": {"smart": {"routes": [
            {"model": "openai/cloud", "api_base": fake.base_url, "api_key": "os.environ/PROVIDER_KEY",
             "prices": "mine", "capabilities": caps},
        ]}},
        "price_tables": {"mine": {"currency": "USD", "as_of": "2026-11-01", "source": "test",
                                  "models": {"openai/cloud": {"input": "1000", "output": "1000"}}}},
        "budget": {"cap": "500.00", "period": "month"},
        "budgets": [{"cap": "0.08", "period": "day", "per": "user"}],
        "server": {
            "teams": {"search": {"budget": {"cap": "0.30", "period": "month", "warn_at": [0.1]}}},
            "keys": {
                "alice": {"key": "os.environ/ALICE_KEY", "team": "search"},
                "bob": {"key": "os.environ/BOB_KEY", "budget": {"cap": "1.00", "period": "day"}},
            },
            "admin_keys": {"ops": {"key": "os.environ/OPS_KEY"}},
            "alerts": {"webhook": hook},
        },
    }


@contextlib.contextmanager
def serving(path: Path) -> Iterator[str]:
    port = _free_port()
    env = {**os.environ, "ALICE_KEY": ALICE, "BOB_KEY": BOB, "OPS_KEY": OPS,
           "PROVIDER_KEY": f"{KEY_PREFIX}provider", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "policy_router", "serve", str(path), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "serving" in line, line + (proc.stdout.read() if proc.poll() is not None else "")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def hook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A webhook on loopback, keeping every JSON body POSTed to it."""
    got: list[dict[str, Any]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/alert", got
    server.shutdown()


def spend(base: str, key: str, scope: str | None = None) -> dict[str, dict[str, Any]]:
    reply = httpx.get(f"{base}/spend", params={"scope": scope} if scope else None,
                      headers={"Authorization": f"Bearer {key}"}, timeout=10)
    assert reply.status_code == 200, reply.text
    return {row["scope"]: row for row in reply.json()["data"]}


def test_a_teams_policy_file_end_to_end(fake: FakeProvider, tmp_path: Path, hook: tuple[str, list[dict[str, Any]]]) -> None:
    url, alerts = hook
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(team_policy(fake, url)))
    with serving(path) as base:
        alice = openai.OpenAI(base_url=base, api_key=ALICE, max_retries=0)
        served = 0
        with pytest.raises(openai.RateLimitError) as refused:
            for _ in range(40):  # one end user, by the header, until their daily cap
                alice.chat.completions.create(
                    model="smart", messages=MESSAGES, max_tokens=5,  # type: ignore[arg-type]
                    extra_headers={"x-policy-router-user": "u-42", "x-policy-router-tags": "search"},
                )
                served += 1
        assert served >= 2 and fake.requests() == served
        assert refused.value.code == "insufficient_quota" and "user:u-42" in refused.value.message
        # The call fits a fresh day: the period is the reason, so Retry-After says when.
        assert 0 < int(refused.value.response.headers["retry-after"]) <= 86400
        everything = spend(base, OPS)
        assert {"all", "team:search", "key:bob", "user:u-42"} <= set(everything)
        for row in everything.values():
            assert Decimal(row["spent"]) <= Decimal(row["cap"]) and row["in_flight"] == 0
        assert Decimal(everything["team:search"]["spent"]) == Decimal(everything["user:u-42"]["spent"]) > 0
        assert set(spend(base, ALICE)) == {"team:search"}  # its own only (alice has no cap of her own)
        assert httpx.get(f"{base}/spend", params={"scope": "key:bob"}, headers={"Authorization": f"Bearer {ALICE}"}, timeout=10).status_code == 403
        # An admin raises that user's cap live; a key may not; an admin calls no model.
        raised = httpx.put(f"{base}/budgets/user:u-42", json={"cap": "0.50", "period": "day"},
                           headers={"Authorization": f"Bearer {OPS}"}, timeout=10)
        assert raised.status_code == 200 and raised.json()["data"][0]["cap"] == "0.500000"
        assert httpx.put(f"{base}/budgets/user:u-42", json={"cap": "9"}, headers={"Authorization": f"Bearer {ALICE}"}, timeout=10).status_code == 403
        assert httpx.put(f"{base}/budgets/user:u-42", json={"cap": 9.5}, headers={"Authorization": f"Bearer {OPS}"}, timeout=10).status_code == 400
        with pytest.raises(openai.PermissionDeniedError):
            openai.OpenAI(base_url=base, api_key=OPS, max_retries=0).models.list()
        alice.chat.completions.create(model="smart", messages=MESSAGES, max_tokens=5, user="u-42")  # type: ignore[arg-type]
        back = httpx.delete(f"{base}/budgets/user:u-42", headers={"Authorization": f"Bearer {OPS}"}, timeout=10)
        assert back.json()["data"][0]["cap"] == "0.080000"
        before = spend(base, OPS)
    # The team's 10% threshold went to the webhook once, with no key and no prompt in it.
    assert [(a["scope"], a["fraction"]) for a in alerts] == [("team:search", 0.1)]
    assert ALICE not in json.dumps(alerts) and "Say hello" not in json.dumps(alerts)
    with serving(path) as base:  # a restart: every scope's period-to-date spend kept
        after = spend(base, OPS)
        assert {s: after[s]["spent"] for s in before} == {s: before[s]["spent"] for s in before}
    from policy_router.cli import main

    assert main(["spend", str(path), "--json"]) == 0


def test_a_keys_team_must_exist_and_the_cli_reads_a_stores_scopes(fake: FakeProvider, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from policy_router import ConfigError
    from policy_router.config.policy_file import load

    data = team_policy(fake, "http://127.0.0.1:9/x")
    data["server"]["keys"]["alice"]["team"] = "nobody"
    with pytest.raises(ConfigError, match=r"server\.keys\.alice\.team names 'nobody'"):
        load(data)
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(team_policy(fake, "http://127.0.0.1:9/x")))
    from policy_router.cli import main

    assert main(["spend", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "team:search" in shown and "key:bob" in shown and "month" in shown
