"""A direct block-YAML emitter for manifests' plain data, byte-identical to `infra.manifests`' PyYAML dump.

Why: serialising is the largest single cost of a cold reconcile (160,000 objects at 10,000 tenants), and
PyYAML's representer and serializer are pure Python even when libyaml emits: ~0.5 ms per object. Manifests
are plain JSON-like data in a handful of shapes, so the block layout is written here directly and PyYAML
keeps every decision that is hard to get exactly right:

- a scalar's *style* (plain, quoted, literal block) comes from PyYAML itself, once per distinct value
  (`_scalar`), except for the common words that are provably plain (`_PLAIN`, checked by a property test
  against PyYAML over random data: tests/gitops/test_yaml_emit.py);
- a plain or single-quoted value past the 120-column width is folded at spaces as libyaml folds it
  (`_fold`);
- anything outside the shapes written here -- another type, a key PyYAML would write as a complex key, a
  double-quoted value a line break could fold, a `|+` block -- makes `emit` return None and the caller
  dumps the whole object with PyYAML, as before.

Layout rules (PyYAML's with indent 2, `default_flow_style=False`, libyaml's emitter): a mapping's keys
at its indent; a non-empty mapping value on the next lines at indent + 2; a non-empty list value on the
next lines at the *same* indent (an "indentless" sequence); a list item's mapping or list starts on the
item's own line after "- "; empty collections are written `{}` / `[]`; a literal block's lines are
indented two more than the collection holding it.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

# What PyYAML writes for a string is plain (the string itself) when it is a word of these characters
# starting with a letter, and not one the YAML 1.1 resolver would read as a bool or null: no indicator,
# no space to fold at, no number, timestamp or document marker can start with a letter. The property test
# checks this against PyYAML; anything else asks PyYAML (`_scalar`).
_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9._/-]*")
_RESOLVED_WORDS = frozenset({"yes", "no", "true", "false", "on", "off", "null"})

WIDTH = 120  # the dump's `width`: a scalar on a line longer than this may be folded at a space

# Distinct scalars -> how PyYAML writes them as a mapping value: (text, is_block). Bounded:
# cleared when full (refilled in one pass).
_STRINGS: dict[str, tuple[str, bool] | None] = {}
_SCALARS: dict[tuple[type, Any], tuple[str, bool] | None] = {}  # the other scalar types
_KEYS: dict[str, str | None] = {}
_MISSING = object()
_MEMO_MAX = 200_000


class Unsupported(Exception):
    """Raised inside the emitter for data it does not write; `emit` returns None instead."""


def _pyyaml(data: Any, dumper: type) -> str:
    return yaml.dump(data, Dumper=dumper, sort_keys=False, default_flow_style=False, width=10**6)


def _scalar(value: Any, dumper: type) -> tuple[str, bool] | None:
    """(text, is_block) of a scalar value as PyYAML writes it after "key: ", or None if not supported.
    `text` is one line, or for a literal block its header line and its content lines (indented by 2)."""
    if type(value) is str:  # by far the most common: one dict lookup once seen
        found = _STRINGS.get(value, _MISSING)
        if found is not _MISSING:
            return found  # type: ignore[return-value]
        if _PLAIN.fullmatch(value) and value.lower() not in _RESOLVED_WORDS:
            found = (value, False)
        else:
            found = _from_pyyaml(value, dumper)
        if len(_STRINGS) >= _MEMO_MAX:
            _STRINGS.clear()
        _STRINGS[value] = found
        return found  # type: ignore[return-value]
    # The type too (True == 1 == 1.0 as dict keys), and a float by its repr (0.0 == -0.0, nan != nan).
    memo = (float, repr(value)) if type(value) is float else (type(value), value)
    if memo not in _SCALARS:
        if len(_SCALARS) >= _MEMO_MAX:
            _SCALARS.clear()
        _SCALARS[memo] = _from_pyyaml(value, dumper)
    return _SCALARS[memo]


def _from_pyyaml(value: Any, dumper: type) -> tuple[str, bool] | None:
    out = _pyyaml({"k": value}, dumper)  # an unbounded width: never folded here; `_value` folds
    if out.startswith("k: ") and out.endswith("\n"):
        body = out[3:-1]
        if "\n" not in body:
            return (body, False)
        if re.fullmatch(r"\|[1-9]?-?", body.split("\n", 1)[0]):  # `|+` may end the document with "..."
            return (body, True)
    return None


def _key(key: Any, dumper: type) -> str:
    text = _KEYS.get(key, _MISSING) if type(key) is str else None
    if text is _MISSING:
        if _PLAIN.fullmatch(key) and key.lower() not in _RESOLVED_WORDS and len(key) <= 128:
            text = key
        else:
            out = _pyyaml({key: 0}, dumper)
            # A key longer than 128 characters or spanning lines is a "complex key" ("? ..."): not written here.
            simple = out.endswith(": 0\n") and "\n" not in out[:-1] and not out.startswith("?")
            text = out[: -len(": 0\n")] if simple else None
        if len(_KEYS) >= _MEMO_MAX:
            _KEYS.clear()
        _KEYS[key] = text
    if text is None:
        raise Unsupported
    return text  # type: ignore[return-value]


_SCALAR_TYPES = (str, int, float, bool, type(None))


def _value(value: Any, column: int, indent: int, out: list[str], dumper: type) -> None:
    """Write a scalar or empty collection that follows a "key:" or "-" ending at `column` on the current
    line (a separating space is added here); `indent`: the indent of the collection holding it."""
    kind = type(value)
    if kind is dict or kind is list:  # only empty ones reach here
        out.append(" {}\n" if kind is dict else " []\n")
        return
    if kind not in _SCALAR_TYPES:
        raise Unsupported
    found = _scalar(value, dumper)
    if found is None:
        raise Unsupported
    text, block = found
    if block:
        header, _, body = text.partition("\n")
        pad = " " * indent
        lines = [f"{pad}{line}" if line else line for line in body.split("\n")]
        out.append(f" {header}\n" + "\n".join(lines) + "\n")
        return
    if column + 1 + len(text) > WIDTH and " " in text:
        text = _fold(text, column + 1, indent + 2)
    out.append(f" {text}\n")


# A space with no space before or after it (where libyaml may break a long scalar).
_SINGLE_SPACE = re.compile(r"(?<! ) (?! )")


def _fold(text: str, column: int, indent: int) -> str:
    """A plain or single-quoted scalar starting at `column` as libyaml folds it past the width: at a single
    space (not first or last, not followed by another) once the line is already longer than WIDTH, the
    space becomes a line break and the next line starts at `indent` (the holding collection's + 2).
    Double-quoted scalars fold differently (escapes): declined."""
    first, last = 0, len(text) - 1
    if text[0] == "'":
        first, last = 1, len(text) - 2  # the value's own first and last characters, inside the quotes
    elif text[0] == '"':
        raise Unsupported
    # Only single spaces can break, so walk those (found by a regex) instead of every character: the
    # capacity rules' expressions are 100,000s of characters at 10,000 tenants with hardly a space in them.
    # Past the last break at `start`, the character at i is at column `base + i - start`.
    parts: list[str] = []
    start, base = 0, column
    for match in _SINGLE_SPACE.finditer(text):
        i = match.start()
        if first < i < last and base + i - start > WIDTH:
            parts += [text[start:i], "\n" + " " * indent]
            start, base = i + 1, indent
    parts.append(text[start:])
    return "".join(parts)


def _mapping(data: dict, indent: int, out: list[str], dumper: type, first_inline: bool) -> None:
    pad = " " * indent
    for i, (key, value) in enumerate(data.items()):
        text = _key(key, dumper)
        out.append(text + ":" if first_inline and i == 0 else f"{pad}{text}:")
        kind = type(value)
        if kind is dict and value:
            out.append("\n")
            _mapping(value, indent + 2, out, dumper, False)
        elif kind is list and value:
            out.append("\n")
            _sequence(value, indent, out, dumper, False)
        else:
            _value(value, indent + len(text) + 1, indent, out, dumper)


def _sequence(data: list, indent: int, out: list[str], dumper: type, first_inline: bool) -> None:
    pad = " " * indent
    for i, item in enumerate(data):
        out.append("-" if first_inline and i == 0 else f"{pad}-")
        kind = type(item)
        if kind is dict and item:
            out.append(" ")
            _mapping(item, indent + 2, out, dumper, True)
        elif kind is list and item:
            out.append(" ")
            _sequence(item, indent + 2, out, dumper, True)
        else:
            _value(item, indent + 1, indent, out, dumper)


def emit(data: Any, dumper: type) -> str | None:
    """The YAML `yaml.dump(data, Dumper=dumper, sort_keys=False, default_flow_style=False, width=120)`
    writes, for a non-empty dict of plain data; None if `data` is outside what this emitter writes."""
    if type(data) is not dict or not data:
        return None
    out: list[str] = []
    try:
        _mapping(data, 0, out, dumper, False)
    except (Unsupported, RecursionError):
        return None
    return "".join(out)
