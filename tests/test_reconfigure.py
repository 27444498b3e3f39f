"""A running router changed: `reconfigure(...)` and `reload()` validate first, swap
atomically, keep what the router learned, say what changed; `policy-router diff`."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from policy_router import (
    Breaker,
    Budget,
    Changes,
    ConfigError,
    Order,
    Reconfigured,
    Route,
    Router,
)
from policy_router.cli import main
from policy_router.testing import Fail, FakeProvider, Hang, Reply

from .conftest import CAPS, MESSAGES, fake_route, prices

PRICES = prices(a="1000")


def _to(router: Router, group: str = "g") -> str:
    return router.route(model=group, messages=MESSAGES).route.name


def test_an_unchanged_group_keeps_its_turn_and_the_change_is_reported(fake: FakeProvider) -> None:
    seen: list[object] = []
    g = [fake_route(fake, n) for n in "abc"]
    router = Router(
        [*g, fake_route(fake, "x", group="h")], order=Order.ROUND_ROBIN, observers=[seen.append]
    )
    assert [_to(router), _to(router)] == ["openai/a", "openai/b"]
    changes = router.reconfigure(
        routes=[*g, fake_route(fake, "x", group="h"), fake_route(fake, "y", group="h")]
    )
    assert changes == Changes(
        groups_changed=("h",),
        groups_kept=("g",),
        routes_added=("openai/y",),
        routes_kept=("openai/a", "openai/b", "openai/c", "openai/x"),
    )
    assert _to(router) == "openai/c"  # g's turn was kept
    assert [r for r in seen if isinstance(r, Reconfigured)] == [Reconfigured(changes)]
    assert "groups changed: h" in str(changes) and "routes added: openai/y" in str(changes)


def test_health_stays_with_routes_that_stay_and_removed_routes_are_forgotten(
    fake: FakeProvider,
) -> None:
    fake.script("a", Fail(503))
    fake.script("b", Fail(503))
    router = Router([fake_route(fake, n) for n in "abc"], breaker=Breaker(failures=1, cooldown=60))
    assert _to(router) == "openai/c"
    assert set(router.resting()) == {"openai/a", "openai/b"}
    changes = router.reconfigure(
        routes=[
            Route(
                "openai/a",
                group="g",
                api_base=fake.base_url,
                api_key="sk-test-rotated",
                capabilities=CAPS,
            ),
            fake_route(fake, "d"),
        ]
    )
    assert changes.routes_changed == ("openai/a",) and changes.routes_removed == (
        "openai/b",
        "openai/c",
    )
    assert set(router.resting()) == {"openai/a"}  # a rotated key keeps its history
    assert _to(router) == "openai/d"
    router.reconfigure(routes=[fake_route(fake, "b"), fake_route(fake, "d")])
    assert router.health()["openai/b"].failures == 0  # came back: starts fresh
    assert _to(router) == "openai/b"


def test_spend_and_learned_speed_are_kept(fake: FakeProvider) -> None:
    fake.script("slow", Hang(0.2, Reply("ok")))
    router = Router(
        [fake_route(fake, "slow", prices=PRICES), fake_route(fake, "quick", prices=PRICES)],
        order=Order.FASTEST,
        budget=Budget("10", unpriced="allow"),
    )
    assert [_to(router), _to(router)] == ["openai/slow", "openai/quick"]
    spent = router.spending().spent
    router.reconfigure(budget=Budget("20", unpriced="allow"), deadline=30)
    assert router.spending().spent == spent and str(router.spending().cap) == "$20.000000"
    assert _to(router) == "openai/quick"  # FASTEST still knows slow is slow


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"routes": []}, "at least one Route"),
        ({"order": "nope"}, "'nope' is not an ordering"),
        ({"deadline": -1}, "deadline"),
        ({"budgte": Budget("1")}, r"not a Router argument: \['budgte'\]"),
        ({"order": {"nowhere": "cheapest"}}, "order names groups no route is in"),
    ],
)
def test_a_change_that_fails_leaves_the_router_as_it_was(
    fake: FakeProvider, change: dict[str, Any], says: str
) -> None:
    router = Router([fake_route(fake, n) for n in "ab"], order=Order.ROUND_ROBIN)
    assert _to(router) == "openai/a"
    before = router.routes
    with pytest.raises(ConfigError, match=says):
        router.reconfigure(**change)
    assert router.routes == before and _to(router) == "openai/b"


def _policy(path: Path, fake: FakeProvider, names: str) -> Path:
    route = {"api_base": fake.base_url, "api_key": "os.environ/RELOAD_KEY"}
    path.write_text(
        yaml.safe_dump(
            {
                "groups": {
                    "g": {
                        "order": "round_robin",
                        "routes": [
                            {"model": f"openai/{n}", **route, "capabilities": {"tools": True}}
                            for n in names
                        ],
                    }
                }
            }
        )
    )
    return path


def test_reload_reads_the_file_again_and_diff_says_the_same(
    fake: FakeProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("RELOAD_KEY", "sk-test-reload")
    path = _policy(tmp_path / "policy.yaml", fake, "ab")
    router = Router.from_config(path)
    assert _to(router) == "openai/a"
    old = tmp_path / "old.yaml"
    old.write_text(path.read_text())
    _policy(path, fake, "abc")
    assert main(["diff", str(old), str(path), "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["routes_added"] == ["openai/c"] and printed["groups_changed"] == ["g"]
    changes = router.reload()
    assert changes.routes_added == ("openai/c",)
    assert [_to(router) for _ in range(3)] == ["openai/a", "openai/b", "openai/c"]
    assert main(["diff", str(path), str(path)]) == 0
    with pytest.raises(ConfigError, match=r"Router\.from_config"):
        Router([fake_route(fake, "a")]).reload()


@pytest.mark.slow
def test_reconfiguring_under_load_loses_nothing_and_mixes_no_configuration(
    fake: FakeProvider,
) -> None:
    """8 threads and 200 tasks send while another thread swaps between two configurations
    50 times: every request is answered, only by routes of one configuration, and the
    provider received exactly the attempts the journeys record."""
    configs = [[fake_route(fake, f"{side}{i}") for i in (1, 2)] for side in "pq"]
    for route in (r for c in configs for r in c):
        # The first route of each fails every other time: those requests fall through to
        # the second, so a journey that changed configuration mid-flight would show it.
        step = (
            [Fail(503), Hang(0.002, Reply("ok"))]
            if route.name.endswith("1")
            else [Hang(0.002, Reply("ok"))] * 2
        )
        fake.script(route.name.removeprefix("openai/"), *step * 400)
    router = Router(configs[0], order=Order.ROUND_ROBIN)
    journeys: list[Any] = []
    lock = threading.Lock()
    done = threading.Event()

    def send(n: int) -> None:
        for _ in range(n):
            routed = router.route(model="g", messages=MESSAGES)
            with lock:
                journeys.append(routed.journey)

    async def tasks() -> None:
        async def one() -> None:
            routed = await router.aroute(model="g", messages=MESSAGES)
            with lock:
                journeys.append(routed.journey)

        await asyncio.gather(*(one() for _ in range(200)))

    def swap() -> None:
        # Paced by progress, not by time: the i-th swap waits for 8 * i answers, so the
        # swaps are spread over the whole run whatever the machine's speed.
        for i in range(50):
            waited = 0
            while len(journeys) < 8 * i and waited < 30_000:  # a failing run must not hang
                threading.Event().wait(0.001)
                waited += 1
            router.reconfigure(routes=configs[(i + 1) % 2])
        done.set()

    threads = [threading.Thread(target=send, args=(25,)) for _ in range(8)]
    threads += [
        threading.Thread(target=swap),
        threading.Thread(target=asyncio.run, args=(tasks(),)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert done.is_set() and len(journeys) == 8 * 25 + 200
    sides = set()
    for j in journeys:
        names = {r.removeprefix("openai/")[0] for r in j.routes}
        assert len(names) == 1 and j.answered_by is not None
        sides |= names
    assert sides == {"p", "q"}
    assert any(len(j.attempts) == 2 for j in journeys)
    assert fake.requests() == sum(len(j.attempts) for j in journeys)
