"""`make demo` tells the whole story on the embedded FakeProvider: cheapest first with the
estimate per route, the breaker resting a failing route, a deadline cutting a slow one, the
floor and the budget refusing before sending, and what was spent."""

from __future__ import annotations

import re

import pytest

from policy_router.cli.demo import demo


@pytest.mark.slow
def test_the_demo_shows_every_promise_and_counts_what_it_sent() -> None:
    printed: list[str] = []
    assert demo(printed.append) == 0
    text = "\n".join(printed)
    lines = text.splitlines()
    listed = lines[1 : lines.index("")]
    assert [line.split()[0] for line in listed] == [
        "openai/local-llama", "openai/vendor-a", "openai/vendor-b",
    ]  # the first table says "cheapest first" and lists them so
    assert "$0.15 in, $0.60 out per million tokens" in listed[1]
    order = [line.split()[0] for line in lines if re.search(r"try #\d", line)]
    assert order == ["openai/vendor-a", "openai/vendor-b"]  # cheapest first, as estimated
    assert all("est. $" in line for line in lines if re.search(r"try #\d", line))
    rows = {line.split("  ")[0]: line for line in lines if re.match(r"\S.*  +(openai/|\()", line)}
    assert "openai/local-llama" in rows["plain chat (free first)"]
    assert "503 server error" in rows["with tools"]
    assert re.search(r"resting \d+\.\d s more after 2 failures", rows["with tools, a-resting"])
    assert "(DeadlineExceededError)" in rows["deadline=1 s, b hangs"]
    assert "(NoRouteError)" in rows["on_device + tools"] and "on-device only" in text
    assert "(OverBudgetError)" in rows["max_tokens=2000"]
    assert "could overrun the budget" in rows["max_tokens=2000"]
    sent = sum(int(re.split(r"\s{2,}", row)[2]) for row in rows.values())
    received = re.search(r"FakeProvider received (\d+) requests", text)
    assert received and int(received[1]) == sent
    # 7 calls: the one the 1 s deadline cut after it was sent is charged its reservation.
    assert re.search(r"Spent \$0\.\d+ of \$0\.010000 in 7 calls; resting: openai/vendor-a", text)
