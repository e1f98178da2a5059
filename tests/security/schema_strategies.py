"""Hypothesis strategies for a tool's JSON Schema: values it admits, and hostile ones.

:func:`arguments` turns an MCP tool's ``inputSchema`` into a strategy for its ``arguments``
dict. Each property draws a value its schema admits or a hostile value of the same JSON type (NaN,
1e308, NUL bytes, lone surrogates, 100 KB strings, traversal paths, catastrophic regexes, bad
globs, ids of the right shape that do not exist). In some calls one property gets a value of
the wrong type (deeply nested lists and dicts among them), a required key is dropped, or an
unknown one is added. :class:`Known` seeds strings with the ids and paths that
exist in the brain under test, so calls reach real objects too.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

HEX = "0123456789ABCDEF"


@dataclass
class Known:
    """Ids, names and paths that exist in the populated brain; ``by_name``: an existing
    object for a property of that name (zk_id, source, path, ...)."""

    strings: list[str] = field(default_factory=list)
    by_name: dict[str, Any] = field(default_factory=dict)


def _nested_list(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


def _nested_dict(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth):
        value = {"a": value}
    return value


HOSTILE_STRINGS: list[str] = [
    "", " ", "\x00", "\x00" * 64, "a\x00b", "\ud800", "x\udfffy", "\ud83d", "\ufeff", "\u202e",
    "../../etc/passwd", "../../../../../../etc/shadow", "/etc/passwd", "/proc/self/environ",
    "/proc", "/sys", "/dev/zero", "/dev/urandom", "/", "~", "~/.ssh/id_rsa", ".", "..",
    "(a+)+$", "(.*a){20}", "[", "]", "**/[", "[!", "\\", "*" * 500, "?" * 300, "{a,b", "[z-a]",
    "%s%n%x", "${HOME}", "$(id)", "'; DROP TABLE notes;--", '{"key": "x"}', "null",
    "ZK-00000000", "ZK-FFFFFFFF", "zk-1a2b3c4d", "ZK-1A2B3C4D\n", "src-000000000000",
    "job-0000000000", "f-" + "0" * 16, "general", "\n" * 500, "\t\r\n",
    "é" * 2000, "𝔘" * 1000,
    "a" * 100_000,                       # one 100 KB token
    "word " * 20_000,                    # 100 KB of words
    "x" * 10_001,                        # just past the usual 10 000-character cap
    "camelCaseIdentifier" * 3_000,       # identifier splitting on a long token
]

HOSTILE_NUMBERS: list[Any] = [
    math.nan, math.inf, -math.inf, 1e308, -1e308, 1e-308, -1, 0, -0.0, 5, 0.5,
    2**31, 2**63, 2**64, -(2**63) - 1, 10**30, -(10**30), 10**100,
]


def _json_scalar() -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20))


def any_json(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Any JSON-shaped value, for wrong-type substitutions. The deep ones stop at 180 levels:
    the wire's JSON parser (jiter) refuses a request nested past ~200, and the client's
    serializer past 255, so deeper values never reach a server."""
    deep = st.sampled_from([_nested_list(180), _nested_dict(180), [None] * 5000])
    tree = st.recursive(
        _json_scalar(),
        lambda inner: st.one_of(st.lists(inner, max_size=4),
                                st.dictionaries(st.text(max_size=8), inner, max_size=4)),
        max_leaves=max_leaves,
    )
    return st.one_of(tree, deep)


def hostile_strings(known: Known) -> st.SearchStrategy[str]:
    shaped = st.builds(lambda h: "ZK-" + h, st.text(HEX, min_size=8, max_size=8))
    return st.one_of(st.sampled_from(HOSTILE_STRINGS), shaped,
                     st.text(st.characters(codec=None), max_size=40),
                     *([st.sampled_from(known.strings)] if known.strings else []))


def _string(schema: dict[str, Any], known: Known, hostile: bool) -> st.SearchStrategy[str]:
    if hostile:
        return hostile_strings(known)
    lo, hi = int(schema.get("minLength", 0)), int(schema.get("maxLength", 40))
    fits = [k for k in known.strings if lo <= len(k) <= hi]
    valid = st.text(string.printable, min_size=lo, max_size=min(hi, 40))
    # existing ids, names and paths two times in three, so calls reach real objects
    return st.one_of(valid, st.sampled_from(fits), st.sampled_from(fits)) if fits else valid


def _number(schema: dict[str, Any], integer: bool, hostile: bool) -> st.SearchStrategy[Any]:
    lo = schema.get("minimum", schema.get("exclusiveMinimum"))
    hi = schema.get("maximum", schema.get("exclusiveMaximum"))
    if hostile:
        edges = [v for b in (lo, hi) if b is not None for v in (b - 1, b, b + 1)]
        return st.sampled_from(HOSTILE_NUMBERS + edges)
    if integer:
        return st.integers(min_value=None if lo is None else int(math.ceil(lo)),
                           max_value=None if hi is None else int(hi))
    return st.floats(min_value=lo, max_value=hi, allow_nan=False,
                     exclude_min="exclusiveMinimum" in schema)


def _array(schema: dict[str, Any], known: Known, hostile: bool) -> st.SearchStrategy[list[Any]]:
    items = schema.get("items", {})
    if hostile:
        big = st.sampled_from([["x"] * 10_000, ["a" * 10_000] * 100])
        return st.one_of(st.lists(_typed(items, known, True), min_size=1, max_size=4), big)
    return st.lists(_typed(items, known, False), max_size=4)


def _object(schema: dict[str, Any], known: Known, hostile: bool) -> st.SearchStrategy[Any]:
    if schema.get("properties"):
        return arguments(schema, known)
    # free-form objects (custom_filters items): filter-shaped dicts, hostile keys/values
    good_key = st.sampled_from(["tags", "project", "note_kind", "salience", "created"])
    key = st.one_of(good_key, hostile_strings(known), any_json(4)) if hostile else good_key
    value: st.SearchStrategy[Any] = st.one_of(st.text(max_size=10), st.integers(-5, 5))
    if hostile:
        value = st.one_of(value, st.sampled_from(HOSTILE_NUMBERS), any_json(4))
    shaped = st.fixed_dictionaries(
        {"key": key},
        optional={"value": value, "any": st.lists(value, max_size=3), "gte": value,
                  "lt": value, "match": value},
    )
    if not hostile:
        return shaped
    return st.one_of(shaped, st.dictionaries(st.text(max_size=10), value, max_size=4))


def _typed(schema: dict[str, Any], known: Known, hostile: bool) -> st.SearchStrategy[Any]:
    if "enum" in schema:
        return hostile_strings(known) if hostile else st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        return _string(schema, known, hostile)
    if kind in ("integer", "number"):
        return _number(schema, kind == "integer", hostile)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return _array(schema, known, hostile)
    if kind == "object":
        return _object(schema, known, hostile)
    if kind == "null":
        return st.none()
    return any_json()


def for_schema(schema: dict[str, Any], known: Known, hostile: bool) -> st.SearchStrategy[Any]:
    """A value for one property: one its schema admits, or a hostile one of its type."""
    branches = schema.get("anyOf") or schema.get("oneOf") or [schema]
    return st.one_of(*(_typed(b, known, hostile) for b in branches))


def arguments(schema: dict[str, Any], known: Known) -> st.SearchStrategy[dict[str, Any]]:
    """An ``arguments`` dict for a tool's ``inputSchema``: one or two properties hostile, the
    rest admitted (else nearly every call would stop at the framework's validation)."""
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))

    @st.composite
    def shaped(draw: st.DrawFn) -> dict[str, Any]:
        names = sorted(props)
        hostile = draw(st.sets(st.sampled_from(names), min_size=1, max_size=2)) if names else set()
        args = {}
        for name in names:
            if name in required or name in hostile or draw(st.booleans()):
                args[name] = draw(for_schema(props[name], known, name in hostile))
        # Hypothesis leans to the smallest draw (0), so each rare event is the largest one.
        if names and draw(st.integers(0, 5)) == 5:
            args[draw(st.sampled_from(names))] = draw(any_json())
        if required and draw(st.integers(0, 19)) == 19:
            args.pop(draw(st.sampled_from(sorted(required))), None)
        if draw(st.integers(0, 9)) == 9:
            args[draw(st.sampled_from(["bogus", "__proto__", "zk_id ", "\x00"]))] = draw(
                any_json(4))
        return args

    return shaped()


# ------------------------------------------------------------------------------ the sweep
# The worst value of each kind, tried once per property on top of the random examples, so a
# derandomized run always meets them (random draws reach a given property/value pair rarely).
SWEEP: dict[str, list[Any]] = {
    "string": ["\ud800", "\x00", "../../etc/passwd", "(a+)+$", "[", "x" * 10_001],
    "number": [1e308, math.nan, -1, 2**64],
    "array": [["\ud800"], ["[", "\x00"], [[["nested"]]]],
    "object": [{"key": {"a": 1}, "value": 1}, {"key": "", "value": 1},
               {"key": "salience", "gte": math.nan}],
}
SWEEP["integer"] = SWEEP["number"]
# A ``path`` property also meets the places issue 13 found accepted: the root, special
# filesystems, a secret-bearing file and a relative escape.
PATH_SWEEP = ["/", "/proc", "/proc/self/environ", "/etc", "/etc/passwd", "../../../../etc"]


def _base_value(name: str, schema: dict[str, Any], known: Known) -> Any:
    """An admitted value for a required property, an existing object's where one fits."""
    if name in known.by_name:
        return known.by_name[name]
    branches = schema.get("anyOf") or [schema]
    first = branches[0]
    if "enum" in first:
        return first["enum"][0]
    return {"string": "deploy notes", "integer": first.get("minimum", 1),
            "number": first.get("minimum", 0.5), "boolean": False, "array": [],
            "object": {}}.get(first.get("type", ""))


def base_arguments(schema: dict[str, Any], known: Known) -> dict[str, Any]:
    """Admitted values for the required properties only."""
    props: dict[str, Any] = schema.get("properties", {})
    return {k: _base_value(k, props[k], known) for k in schema.get("required", [])}


def sweep(schema: dict[str, Any], known: Known, per_kind: int = 99) -> list[dict[str, Any]]:
    """For each property, calls that give it one worst value of its kind (custom_filters
    items: objects) and every required property an admitted one."""
    props: dict[str, Any] = schema.get("properties", {})
    base = base_arguments(schema, known)
    out = []
    for name, prop in sorted(props.items()):
        kinds = {b.get("type") for b in (prop.get("anyOf") or [prop])} - {"null", None}
        items = [b.get("items", {}) for b in (prop.get("anyOf") or [prop]) if "items" in b]
        values: list[Any] = []
        for kind in sorted(kinds):
            values += SWEEP.get(kind, [])[:per_kind]
        if any(i.get("type") == "object" for i in items):
            values += [[v] for v in SWEEP["object"]]
        if name == "path":
            values += PATH_SWEEP
        out += [{**base, name: v} for v in values]
    return out
