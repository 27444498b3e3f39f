"""The package's layout: parts as subpackages that say what they may import, small modules,
and the import paths the README and DESIGN §5 show."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "policy_router"
PARTS = ("cli", "config", "core", "drive", "endpoints", "ground", "integrations", "observe",
         "policies", "state", "state/redis", "testing")


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_400_lines(path: Path) -> None:
    """Each module fits in one sitting: at most 400 lines."""
    assert len(path.read_text().splitlines()) <= 400


@pytest.mark.parametrize("part", PARTS)
def test_each_part_says_what_it_is_for(part: str) -> None:
    """Every part's `__init__` has a docstring, so the folder explains itself."""
    tree = ast.parse((PACKAGE / part / "__init__.py").read_text())
    doc = ast.get_docstring(tree)
    assert doc and len(doc.split()) >= 8


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("policy_router", "Router"),
        ("policy_router.testing", "FakeProvider"),
        ("policy_router.integrations.langchain", "ChatPolicyRouter"),
        ("policy_router.integrations.langchain", "PolicyRouterEmbeddings"),
        ("policy_router.integrations.otel", "OTelObserver"),
        ("policy_router.observe", "to_pandas"),
        ("policy_router.observe", "AttemptLog"),
    ],
)
def test_the_documented_import_paths_work(module: str, name: str) -> None:
    """Every import path the README or DESIGN §5 shows still imports its name."""
    assert hasattr(importlib.import_module(module), name)


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of `graph` (strongly connected parts of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                on.discard(top)
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle_in_the_package() -> None:
    """No module of the package reaches itself through imports, lazy ones included."""
    import grimp

    built = grimp.build_graph("policy_router")
    graph = {m: set(built.find_modules_directly_imported_by(m)) for m in built.modules}
    assert _circles(graph) == []


def test_a_circle_is_found_when_there_is_one() -> None:
    """The circle finder itself sees a three-module loop (so the test above can fail)."""
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
