"""`policy-router serve --workers N` and `serve --demo`: real server processes on loopback.

Two workers over one SQLite store keep one budget exact across them (spent <= cap, every
request sent once, the refused ones not at all) and answer one Prometheus scrape for both;
a store only one process holds is refused for more than one worker before serving; the
demo serves its routes on FakeProvider with a printed key that the openai and anthropic
SDKs use as they are."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from policy_router.testing import FakeProvider, Hang

from .conftest import KEY_PREFIX
from .test_server import MESSAGES, ROOT, TEAM, _free_port, policy, wait_healthy

ADMIN = "sk-admin-workers-7"


@contextlib.contextmanager
def launched(args: list[str], tmp_path: Path, **env: str) -> Iterator[tuple[subprocess.Popen[str], str, Path]]:
    """`python -m policy_router serve ARGS --port P`, until it answers /health; yields the
    process, its base URL and the file its output goes to; stopped with SIGTERM after."""
    port = _free_port()
    out = tmp_path / f"serve-{port}.out"
    full = {**os.environ, "TEAM_KEY": TEAM, "LOCAL_KEY": "sk-local-key-3", "ADMIN_KEY": ADMIN,
            "PROVIDER_KEY": f"{KEY_PREFIX}provider", "PYTHONPATH": str(ROOT), **env}
    with out.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "policy_router", "serve", *args, "--port", str(port)],
            stdout=sink, stderr=subprocess.STDOUT, env=full, cwd=tmp_path, text=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, base, out, tries=900)  # each worker imports LiteLLM
        yield proc, base, out
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def workers(pid: int) -> list[int]:
    """The worker processes the server started (not multiprocessing's resource tracker)."""
    found = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        with contextlib.suppress(OSError):
            line = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"spawn_main" in line:
                found.append(int(child))
    return found


def _wait_for_workers(proc: subprocess.Popen[str], base: str, count: int) -> None:
    """Until `count` worker processes run (one still importing takes no connection yet:
    the others answer for it)."""
    for _ in range(900):
        if len(workers(proc.pid)) == count:
            break
        time.sleep(0.1)
    assert len(workers(proc.pid)) == count


@pytest.mark.slow
def test_two_workers_share_one_budget_exactly_and_one_scrape(fake: FakeProvider, tmp_path: Path) -> None:
    """40 concurrent calls through two workers against a key's $0.20 cap on one SQLite
    store: the providers receive exactly the calls that were answered, spent <= cap, and
    a scrape of either worker counts all 40."""
    data = policy(fake, breaker=False, store=f"sqlite:///{tmp_path / 'state.sqlite'}")
    data["server"]["admin_keys"] = {"ops": {"key": "os.environ/ADMIN_KEY"}}
    # Slow enough that the calls overlap across both workers.
    fake.responder = lambda model, body: Hang(0.3)
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(data))
    with launched([str(path), "--workers", "2"], tmp_path) as (proc, base, _):
        _wait_for_workers(proc, base, 2)
        sdk = openai.OpenAI(base_url=f"{base}/v1", api_key=TEAM, max_retries=0)

        def ask(_: int) -> str:
            try:
                sdk.chat.completions.create(model="smart", messages=MESSAGES)  # type: ignore[arg-type]
                return "answered"
            except openai.RateLimitError:
                return "refused"

        with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
            results = list(pool.map(ask, range(40)))
        account = httpx.get(f"{base}/health", headers={"Authorization": f"Bearer {TEAM}"}, timeout=10).json()["key"]
        scrape = httpx.get(f"{base}/metrics", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10).text
        # A supervisor killed outright takes its workers with it: none keeps the port.
        running = workers(proc.pid)
        proc.kill()
        proc.wait(30)
        for _ in range(300):
            if not any(Path(f"/proc/{pid}").exists() for pid in running):
                break
            time.sleep(0.1)
        assert not any(Path(f"/proc/{pid}").exists() for pid in running)
    answered = results.count("answered")
    assert answered >= 1 and "refused" in results  # the cap is met: the bound is what is tested
    assert fake.requests() == answered
    assert Decimal(account["spent"]) <= Decimal(account["cap"]) == Decimal("0.20")
    assert account["in_flight"] == 0 and account["calls"] == answered
    counted = sum(
        s.value for f in text_string_to_metric_families(scrape) for s in f.samples
        if s.name == "policy_router_requests_total" and s.labels.get("key") == "team"
    )
    assert counted == 40


def test_more_than_one_worker_over_a_store_of_one_process_is_refused_before_serving(capsys: pytest.CaptureFixture[str]) -> None:
    from policy_router.cli.main import main

    assert main(["serve", "--demo", "--workers", "2", "--port", str(_free_port())]) == 2
    said = capsys.readouterr().err
    assert "--workers 2 needs a store the workers share" in said
    assert "serving" not in said


def test_serve_demo_is_tried_with_the_printed_key_and_no_provider_key(tmp_path: Path) -> None:
    """The demo prints its key and how each client is pointed at it; the openai SDK (chat,
    embeddings) and the anthropic SDK (Messages) work with that key and nothing else."""
    env = {k: "" for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    with launched(["--demo"], tmp_path, **env) as (_, base, out):
        printed = out.read_text()
        key = re.search(r"API key:\s+(\S+)", printed)
        assert key is not None, printed
        assert f"ANTHROPIC_BASE_URL={base}" in printed and f"OPENAI_BASE_URL={base}/v1" in printed
        chat = openai.OpenAI(base_url=f"{base}/v1", api_key=key.group(1), max_retries=0)
        answer = chat.chat.completions.create(model="smart", messages=MESSAGES)  # type: ignore[arg-type]
        assert "demo" in (answer.choices[0].message.content or "")
        assert chat.embeddings.create(model="emb", input="hi").data[0].embedding
        claude: Any = anthropic.Anthropic(base_url=base, api_key=key.group(1), max_retries=0)
        message = claude.messages.create(model="smart", max_tokens=50, messages=MESSAGES)
        assert "demo" in message.content[0].text
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=f"{base}/v1", api_key="sk-wrong", max_retries=0).models.list()
