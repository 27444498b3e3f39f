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


def test_public_names_show_as_the_package_s_own() -> None:
    """Every public name reads `policy_router.X` (its repr, a traceback, a log), as the
    user imports it; its annotations still resolve; its records still pickle."""
    import pickle
    import traceback
    import typing

    from policy_router import Check, NoRouteError, Skip

    for name in policy_router.__all__:
        assert getattr(policy_router, name).__module__ == "policy_router", name
    try:
        raise NoRouteError("no route in group 'g'")
    except NoRouteError:
        shown = traceback.format_exc()
    assert "policy_router.NoRouteError: no route in group 'g'" in shown
    for name in ("Attempt", "Journey", "Route", "Skip", "Health", "Retry", "Breaker", "Hedge", "Routed"):
        hints = typing.get_type_hints(getattr(policy_router, name))
        assert hints and not any(isinstance(h, str) for h in hints.values()), name
    skip = Skip("openai/a", Check.BUDGET, "spent", detail={"left": 0})
    assert pickle.loads(pickle.dumps(skip)) == skip


def test_no_two_classes_of_the_package_share_a_name() -> None:
    """A name says what it is: no two modules of the package define a class (or a type
    alias) of the same name, so a traceback, a search or a reader never mistakes one for
    the other (there were two `Verdict`s, two `Ordering`s, two `Usage`s and two `Cut`s)."""
    import ast
    from collections import defaultdict
    from pathlib import Path

    defined: defaultdict[str, list[str]] = defaultdict(list)
    for path in sorted(Path(policy_router.__file__).parent.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                defined[node.name].append(str(path))
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id[:1].isupper() and not target.id.isupper():
                        defined[target.id].append(str(path))
    assert {n: p for n, p in defined.items() if len(p) > 1} == {}
