"""What a notebook shows for `health()`, `usage()` and `spending()`: a table, no raw clock
readings, every cell escaped; the values stay the plain dicts and records they were."""

from __future__ import annotations

from policy_router import Breaker, Budget, Router
from policy_router.state.store import Health
from policy_router.testing import Fail, FakeProvider

from .conftest import MESSAGES, fake_route, prices


def test_health_is_a_dict_shown_as_a_table_of_rest_left(fake: FakeProvider) -> None:
    fake.script("a", Fail(503, "<overloaded> & tired"))
    router = Router(
        [fake_route(fake, m) for m in "ab"], breaker=Breaker(failures=1, cooldown=30)
    )
    router.route(model="g", messages=MESSAGES)
    health = router.health()
    assert isinstance(health, dict) and isinstance(health["openai/a"], Health)
    html = health._repr_html_()
    assert "<th>rest left</th>" in html and "<td>openai/a</td><td>open</td><td>1</td>" in html
    assert "&lt;overloaded&gt; &amp; tired" in html and "<overloaded>" not in html
    assert f"{health['openai/a'].rest_until:.2f}" not in html  # a clock reading means nothing
    assert "30.0 s" in html or "29.9 s" in html


def test_usage_and_spending_are_tables_too(fake: FakeProvider) -> None:
    router = Router(
        [fake_route(fake, "a", rpm=100, prices=prices(a="1000"))], budget=Budget("1.00")
    )
    router.route(model="g", messages=MESSAGES, max_tokens=10)
    usage = router.usage()
    assert usage["openai/a"].requests == 1
    assert "<th>requests</th>" in usage._repr_html_() and "<td>openai/a</td><td>1</td>" in usage._repr_html_()
    spending = router.spending()
    html = spending._repr_html_()
    assert "<th>spent</th>" in html and f"<td>{spending.spent}</td>" in html
    assert "<td>$1.000000</td>" in html
