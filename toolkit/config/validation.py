"""Validation helpers of the YAML configs: a loader that refuses duplicate keys, and error messages that name the
file and the key (``configs/x.yaml: training.epochs: ...``)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import yaml

from toolkit.errors import ToolkitError

class UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader that refuses a key given twice in one mapping (PyYAML keeps the last silently)."""


def construct_unique_mapping(loader: UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {seen[key] + 1})", key_node.start_mark)
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_unique_mapping)

class Where:
    """Error messages that name the file and the key: ``configs/x.yaml: training.epochs: ...``."""

    def __init__(self, source: str):
        self.source = source

    def error(self, key: str, msg: str) -> ToolkitError:
        return ToolkitError(f"{self.source}: {key}: {msg}" if key else f"{self.source}: {msg}")

    def mapping(self, data: Any, key: str, allowed: set[str], required: set[str] = frozenset()) -> dict:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise self.error(key, f"expected a mapping, got {type(data).__name__} {data!r}")
        unknown = sorted(set(map(str, data)) - allowed)
        if unknown:
            raise self.error(key, f"unknown key(s) {unknown}; allowed: {sorted(allowed)}")
        missing = sorted(required - set(data))
        if missing:
            raise self.error(key, f"missing required key(s) {missing}")
        return dict(data)

    def integer(self, value: Any, key: str, *, minimum: int | None = None, allow_none: bool = False) -> int | None:
        if value is None and allow_none:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
            bound = f" >= {minimum}" if minimum is not None else ""
            raise self.error(key, f"must be an integer{bound}{' or null' if allow_none else ''}, got {value!r}")
        return value

    def epochs(self, value: Any, key: str) -> list[int]:
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if (not isinstance(value, list) or not value
                or any(isinstance(e, bool) or not isinstance(e, int) or e < 1 for e in value)):
            raise self.error(key, f"must be a non-empty list of positive integers (checkpoint epochs), got {value!r}")
        return sorted(set(value))


def field_names(cls) -> set[str]:
    return {f.name for f in fields(cls)}


def set_dotted(raw: dict, dotted: str, value: Any, where: Where) -> None:
    node = raw
    parts = dotted.split(".")
    for i, part in enumerate(parts[:-1]):
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise where.error(".".join(parts[:i + 1]), f"is not a mapping; cannot set {dotted!r}")
        node = nxt
    node[parts[-1]] = value




__all__ = ["UniqueKeyLoader", "Where", "field_names", "set_dotted"]
