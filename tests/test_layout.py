"""The package's layout: parts as subpackages that say what they may import, small modules,
and the import paths the README and DESIGN §5 show."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "policy_router"
PARTS = ("cli", "config", "core", "drive", "drive/seam", "endpoints", "ground", "integrations", "observe", "server",
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


def test_no_record_of_the_package_is_built_from_more_than_three_positional_arguments() -> None:
    """A record is built by naming its fields: no call to a dataclass of the package passes
    more than three positional arguments (swapping two adjacent floats of an 18-field
    `Attempt` would pass mypy), and the records of four fields or more are keyword-only."""
    import ast
    import dataclasses
    import importlib
    import inspect
    import pkgutil
    from pathlib import Path

    import policy_router

    records: dict[str, type] = {}
    for found in pkgutil.walk_packages(policy_router.__path__, "policy_router."):
        module = importlib.import_module(found.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and dataclasses.is_dataclass(value) and value.__module__ in (
                found.name, "policy_router"
            ):
                records[name] = value
    root = Path(policy_router.__file__).parent
    crowded = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if called in records and len([a for a in node.args if not isinstance(a, ast.Starred)]) > 3:
                crowded.append(f"{path.relative_to(root)}:{node.lineno} {called}")
            if called in records and any(isinstance(a, ast.Starred) for a in node.args):
                crowded.append(f"{path.relative_to(root)}:{node.lineno} {called}(*...)")
    assert crowded == []
    # The policies a user writes (Breaker, Retry, ...), FakeProvider's scripted steps
    # (`Fail(503, "down")`) and two-or-three-field values stay as they were; every other
    # record of four fields or more takes keywords only.
    values = {"Breaker", "Retry", "Hedge", "Score", "Requirements", "Capabilities", "StoreCall"}
    positional = {
        name
        for name, record in records.items()
        if name not in values
        and not record.__module__.startswith("policy_router.testing")
        and len([f for f in dataclasses.fields(record) if f.init]) >= 4
        and sum(1 for f in dataclasses.fields(record) if f.init and not f.kw_only) > 3
    }
    assert positional == set()


def _package_classes() -> dict[type, str]:
    """Every class the package defines, with the module that defines it."""
    import importlib
    import inspect
    import pkgutil

    import policy_router

    found: dict[type, str] = {}
    for module_info in pkgutil.walk_packages(policy_router.__path__, "policy_router."):
        module = importlib.import_module(module_info.name)
        for value in vars(module).values():
            if inspect.isclass(value) and value.__module__ == module_info.name:
                found[value] = module_info.name
    return found


def _sets(tree: ast.Module, cls: str, attribute: str) -> bool:
    """Whether class `cls` of the module parsed as `tree` assigns `self.<attribute>` (or
    `cls.<attribute>`, or through `object.__setattr__`) anywhere in its body."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ClassDef) and node.name == cls):
            continue
        for sub in ast.walk(node):
            targets: list[ast.expr] = []
            if isinstance(sub, ast.Assign):
                targets = list(sub.targets)
            elif isinstance(sub, ast.AnnAssign | ast.AugAssign):
                targets = [sub.target]
            for target in targets:
                for one in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if (
                        isinstance(one, ast.Attribute)
                        and one.attr == attribute
                        and isinstance(one.value, ast.Name)
                        and one.value.id in ("self", "cls")
                    ):
                        return True
            if (
                isinstance(sub, ast.Call)
                and getattr(sub.func, "attr", "") == "__setattr__"
                and len(sub.args) >= 2
                and isinstance(sub.args[1], ast.Constant)
                and sub.args[1].value == attribute
            ):
                return True
    return False


def _leaning(cls: type, source: str) -> list[str]:
    """The attributes `cls` declares (a bare annotation in its body) that its own module
    (`source`) never sets: state some other module's class provides, as a mixin's is.
    Records (dataclasses, named tuples, typed dicts, pydantic models) and protocols declare
    fields that their own machinery sets, and a `ClassVar` is the class's own constant."""
    import dataclasses
    import inspect
    import typing

    if (
        dataclasses.is_dataclass(cls)
        or typing.is_typeddict(cls)
        or getattr(cls, "_is_protocol", False)
        or issubclass(cls, tuple)
        or any(base.__name__ == "BaseModel" for base in cls.__mro__)
    ):
        return []
    tree = ast.parse(source)
    leaning = []
    for attribute, annotation in inspect.get_annotations(cls).items():
        if "ClassVar" in str(annotation):
            continue
        value = cls.__dict__.get(attribute)
        if value is not None and not inspect.ismemberdescriptor(value):
            continue  # declared with its value in the class body
        if not _sets(tree, cls.__name__, attribute):
            leaning.append(f"{cls.__module__}.{cls.__qualname__}.{attribute}")
    return leaning


def test_no_class_of_the_package_leans_on_state_another_module_sets() -> None:
    """Parts are held, not mixed in: no class declares an attribute its own module never
    sets (a mixin reading the state of the class it is mixed into), and no class of the
    package inherits from two of its classes."""
    import importlib

    classes = _package_classes()
    leaning: list[str] = []
    mixed: list[str] = []
    for cls, module in classes.items():
        path = importlib.import_module(module).__file__
        assert path is not None
        leaning += _leaning(cls, Path(path).read_text())
        ours = [base.__name__ for base in cls.__bases__ if base in classes]
        if len(ours) > 1:
            mixed.append(f"{module}.{cls.__qualname__}({', '.join(ours)})")
    assert leaning == []
    assert mixed == []


def test_a_mixin_over_another_modules_state_is_found() -> None:
    """The check above sees the shape it forbids (so it can fail): a class that declares
    the state it reads and leaves setting it to whatever class it is mixed into."""
    source = (
        "class Capacity:\n"
        "    _queue: list[int]\n"
        "    _poll: float\n"
        "    def wait(self) -> float:\n"
        "        return self._poll if self._queue else 0.0\n"
        "class Held:\n"
        "    _poll: float\n"
        "    def __init__(self) -> None:\n"
        "        self._poll = 0.05\n"
    )
    space: dict[str, object] = {}
    exec(compile(source, "<mixin>", "exec"), space)
    assert _leaning(space["Capacity"], source) == ["builtins.Capacity._queue", "builtins.Capacity._poll"]  # type: ignore[arg-type]
    assert _leaning(space["Held"], source) == []  # type: ignore[arg-type]
