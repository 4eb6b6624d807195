"""The Python README's signatures and field lists are the code's (issue 42, item 11: they had
drifted): each ``### `ferry.X(...)` `` heading of bindings/python/README.md against
inspect.signature, and the OpInfo and SyncInfo field lists against dataclasses.fields."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest

import ferry
import ferry.diloco

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()

# Parameters kept only as deprecated aliases: the README documents the current forms.
DEPRECATED = {"log"}


def shown(value) -> str:
    if isinstance(value, str):
        return '"' + value + '"'
    if callable(value):
        return f"{value.__module__}.{value.__qualname__}"
    return repr(value)


def documented_form(cls) -> str:
    parts, keyword_only = [], False
    for p in inspect.signature(cls).parameters.values():
        if p.name in DEPRECATED:
            continue
        if p.kind is p.KEYWORD_ONLY and not keyword_only:
            parts.append("*")
            keyword_only = True
        parts.append(p.name if p.default is p.empty else f"{p.name}={shown(p.default)}")
    return ", ".join(parts)


@pytest.mark.parametrize("name, cls", [("ferry.Master", ferry.Master), ("ferry.Communicator", ferry.Communicator),
                                       ("ferry.diloco.DiLoCo", ferry.diloco.DiLoCo)])
def test_each_heading_is_the_signature(name, cls):
    heading = re.search(r"^### `" + re.escape(name) + r"\((.*)\)`$", README, re.M)
    assert heading, f"bindings/python/README.md has no '### `{name}(...)`' heading"
    assert heading[1] == documented_form(cls)


@pytest.mark.parametrize("cls", [ferry.OpInfo, ferry.SyncInfo])
def test_each_field_list_is_the_dataclass(cls):
    listed = re.search(r"`" + cls.__name__ + r"\(([^)]*)\)`", README)
    assert listed, f"bindings/python/README.md does not list `{cls.__name__}(...)`"
    assert [f.strip() for f in listed[1].split(",")] == [f.name for f in dataclasses.fields(cls)]
