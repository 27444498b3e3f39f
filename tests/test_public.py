"""The public names DESIGN §5 promises, and what the optional extras cost when unused."""

from __future__ import annotations

import subprocess
import sys

import pytest

import policy_router
from policy_router import ConfigError, RedisStore


def test_the_design_import_line_works() -> None:
    """Every name of DESIGN §5's import line comes from the package root."""
    from policy_router import (  # noqa: F401
        AllRestingError,
        Attempt,
        Breaker,
        Budget,
        ConfigError,
        DeadlineExceededError,
        InMemoryStore,
        NoRouteError,
        Order,
        OverBudgetError,
        PolicyRouterError,
        Price,
        PriceTable,
        Reach,
        RedisStore,
        RefusedError,
        Requirements,
        Retry,
        Route,
        Routed,
        Router,
        Spending,
    )

    assert policy_router.__all__ == sorted(policy_router.__all__)


def test_redis_store_needs_the_extra_only_when_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without redis-py, building a RedisStore says which extra to install."""
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(ConfigError, match=r"pip install 'policy-router\[redis\]'"):
        RedisStore("redis://127.0.0.1:6379/0")


@pytest.mark.slow
def test_importing_the_package_imports_no_optional_extra() -> None:
    """redis, langchain and pandas load only when their feature is used."""
    code = (
        "import sys, policy_router; "
        "print(sorted(m for m in ('redis', 'langchain_core', 'pandas', 'sqlite3') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
