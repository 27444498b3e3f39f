"""MkDocs hooks: the policy file's keys generated from the schema the loader reads, and the
notebooks' stored plots served with the pages."""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
MARKER = "<!-- policy-file-keys -->"


def on_files(files: Files, config: Any) -> Files:
    for image in sorted((ROOT / "notebooks" / "images").glob("*.png")):
        files.append(File(f"images/{image.name}", str(image.parent.parent), config["site_dir"], False))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, keys_table())


def keys_table() -> str:
    from policy_router import Score
    from policy_router.config.spec import PolicySpec

    rows: list[tuple[str, str, str, str]] = []
    _walk(PolicySpec, "", rows)
    for f in dataclasses.fields(Score):
        rows.append((f"score.{f.name}", _type(f.type), _default(f.default), "a `Score` field"))
    lines = ["| key | type | default | what it is |", "| --- | --- | --- | --- |"]
    lines += [f"| `{k}` | {t} | {d} | {w} |" for k, t, d, w in rows]
    return "\n".join(lines) + "\n"


def _walk(model: type[BaseModel], prefix: str, rows: list[tuple[str, str, str, str]]) -> None:
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        nested = _models(field.annotation)
        default = "required" if field.is_required() else _default(field.get_default(call_default_factory=True))
        what = " ".join((field.description or "").split()).replace("|", "\\|")
        if name == "score":
            what = what or "`Score`'s fields, below"
        rows.append((key, _type(field.annotation), default, what))
        for inner, how in nested:
            _walk(inner, f"{key}{how}.", rows)


def _models(annotation: Any) -> list[tuple[type[BaseModel], str]]:
    """The models inside an annotation, with how a key reaches them (`.<name>`, `[]`)."""
    found: list[tuple[type[BaseModel], str]] = []
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, "")]
    if origin is dict:
        for inner, how in _models(typing.get_args(annotation)[1]):
            found.append((inner, ".<name>" + how))
    elif origin is list:
        for inner, how in _models(typing.get_args(annotation)[0]):
            found.append((inner, "[]" + how))
    elif origin in (typing.Union, types.UnionType, typing.Annotated):
        for arg in typing.get_args(annotation):
            found += _models(arg)
    return found


def _type(annotation: Any) -> str:
    text = str(annotation).replace("typing.", "").replace("policy_router.config.spec.", "")
    text = text.replace("policy_router.config.observing.", "").replace("<class '", "").replace("'>", "")
    text = text.replace("decimal.Decimal", "Decimal").replace("NoneType", "None")
    return f"`{text}`".replace("|", "\\|")


def _default(value: Any) -> str:
    if value is None or value is dataclasses.MISSING:
        return "—"
    if isinstance(value, dict | list) and not value:
        return "empty"
    return f"`{value!r}`".replace("|", "\\|")
