"""Schema-valid example values for JSON Schemas (used by ``TestModel``): formats, bounds,
``multipleOf``, lengths and regular-expression patterns."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeAlias, cast

from tether.errors import UserError

__all__ = ["EXAMPLE_LIMIT", "pattern_example", "schema_example"]

EXAMPLE_LIMIT = 65_536
"""The most characters (of strings) plus items (of arrays and objects) a value made by
``schema_example`` or ``pattern_example`` may hold. The schemas can be a client's (a tool the
front end declares): ``"minLength": 30000000`` would otherwise be a 30 MB call, built in memory
before anything else looks at it. A schema that needs more is refused with ``UserError``."""
_SEARCH_WORK = 32 * EXAMPLE_LIMIT
"""Characters ``pattern_example`` may generate while it looks for a fitting string."""


class _Budget:
    """What is left of ``EXAMPLE_LIMIT`` for one value (or of the work of one pattern search)."""

    __slots__ = ("left", "limit", "search")

    def __init__(self, limit: int = EXAMPLE_LIMIT, *, search: bool = False) -> None:
        self.left = self.limit = limit
        self.search = search

    def take(self, n: int, what: str) -> None:
        self.left -= n
        if self.left < 0:
            if self.search:
                raise UserError(
                    f"schema_example: {what} found no fitting string within {self.limit} characters "
                    "of trials: give the pattern a shorter minLength"
                )
            raise UserError(
                f"schema_example: {what} makes the value larger than {self.limit} characters and "
                "items (EXAMPLE_LIMIT): test models make small examples"
            )


_FORMATS: Mapping[str, str] = MappingProxyType(
    {
        "date-time": "2000-01-01T00:00:00Z",
        "date": "2000-01-01",
        "time": "00:00:00Z",
        "partial-time": "00:00:00",
        "duration": "PT1S",
        "uuid": "00000000-0000-4000-8000-000000000000",
        "decimal": "0",
        "email": "user@example.com",
        "idn-email": "user@example.com",
        "hostname": "example.com",
        "idn-hostname": "example.com",
        "ipv4": "127.0.0.1",
        "ipv6": "::1",
        "uri": "https://example.com/",
        "iri": "https://example.com/",
        "uri-reference": "https://example.com/",
        "url": "https://example.com/",
    }
)


def schema_example(schema: dict[str, Any], root: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """A small value valid for a JSON Schema (the subset tool schemas use): ``$ref``, ``enum``,
    ``const``, ``default``, ``anyOf``/``oneOf``/``allOf`` (first option), objects (with
    ``minProperties``), arrays and tuples (``prefixItems``, ``minItems``/``maxItems``), strings
    with a ``format`` (date-time, date, time, duration, uuid, ...), base64 content, a
    ``pattern`` and ``minLength``/``maxLength``, and numbers within ``minimum``/``maximum``
    (exclusive or not) and ``multipleOf``. Raises ``UserError`` when no value can satisfy the
    schema (an empty range, an unsatisfiable pattern, bounds that are not finite numbers or an
    integer beyond 64 bits) or when the value would be larger than ``EXAMPLE_LIMIT``."""
    return _example(schema, schema if root is None else root, depth, _Budget())


def _example(schema: dict[str, Any], root: dict[str, Any], depth: int, budget: _Budget) -> Any:
    if depth > 32:
        raise UserError("schema_example: the schema nests deeper than 32 levels")
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        return _example(root.get("$defs", {}).get(name, {}), root, depth + 1, budget)
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = cast(list[dict[str, Any]], schema.get(key) or [])
        if options:
            non_null = [o for o in options if o.get("type") != "null"] or options
            return _example(non_null[0], root, depth + 1, budget)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kinds = [k for k in cast(list[str], kind) if k != "null"] or ["null"]
        kind = kinds[0]
    if kind == "object":
        props = cast(dict[str, dict[str, Any]], schema.get("properties", {}))
        budget.take(len(props), "properties")
        out = {k: _example(v, root, depth + 1, budget) for k, v in props.items()}
        extra = schema.get("additionalProperties")
        wanted = _count(schema.get("minProperties", 0), "minProperties")
        budget.take(max(0, wanted - len(out)), f"minProperties {wanted}")
        value_schema = cast(dict[str, Any], extra) if isinstance(extra, dict) else {}
        n = 0
        while len(out) < wanted:
            n += 1
            out.setdefault(f"key{n}", _example(value_schema, root, depth + 1, budget))
        return out
    if kind == "array":
        prefix = cast(list[dict[str, Any]], schema.get("prefixItems") or [])
        if prefix:
            budget.take(len(prefix), "prefixItems")
            return [_example(item, root, depth + 1, budget) for item in prefix]
        items = cast(dict[str, Any], schema.get("items") or {})
        count = max(_count(schema.get("minItems", 1), "minItems"), 1)
        max_items = schema.get("maxItems")
        if isinstance(max_items, int):
            count = min(count, max_items)
        budget.take(count, f"minItems {count}")
        return [_example(items, root, depth + 1, budget) for _ in range(count)]
    if kind == "string":
        return _string_example(schema, budget)
    if kind == "integer":
        return _integer_example(schema)
    if kind == "number":
        return _number_example(schema)
    if kind == "boolean":
        return False
    return None


def _count(value: object, what: str, *, least: bool = True) -> int:
    """A ``minLength``/``minItems``/``minProperties`` (``least``) or ``maxLength`` of a schema as an
    int; ``UserError`` for a value that is not a finite non-negative number, or a least count
    over ``EXAMPLE_LIMIT``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise UserError(f"schema_example: {what} must be a non-negative integer, not {_short(value)}")
    if least and value > EXAMPLE_LIMIT:
        _Budget().take(EXAMPLE_LIMIT + 1, f"{what} {_short(value)}")
    return int(value)


def _string_example(schema: dict[str, Any], budget: _Budget) -> str:
    min_len = _count(schema.get("minLength", 0), "minLength")
    max_len = schema.get("maxLength")
    top = _count(max_len, "maxLength", least=False) if isinstance(max_len, int | float) else None
    if top is not None and top < min_len:
        raise UserError(f"schema_example: no string has minLength {min_len} and maxLength {top}")
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt in _FORMATS:
        return _FORMATS[fmt]
    budget.take(min_len, f"minLength {min_len}")
    if schema.get("contentEncoding") == "base64":
        return "AAAA" * (-(-min_len // 4))
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        text = pattern_example(pattern, min_len, top)
        budget.take(len(text) - min_len, f"pattern {pattern[:40]!r}")
        return text
    length = max(min_len, 1) if top is None else min(max(min_len, 1), top)
    budget.take(length - min_len, "a string")
    return "a" * length


_HUGE = 10**300
"""Integers this large are refused (a bound of thousands of digits is no tool's argument, and
past 4,300 digits Python will not even write it)."""


def _bounds(schema: dict[str, Any]) -> tuple[float | None, bool, float | None, bool]:
    """``(low, low_open, high, high_open)`` from minimum/maximum and their exclusive forms."""
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
        value = schema.get(key)
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"schema_example: {key} must be a finite number, not {value!r}")
    lo: float | None = schema.get("minimum")
    hi: float | None = schema.get("maximum")
    xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    lo_open = hi_open = False
    if isinstance(xlo, bool):  # draft 4: a flag on minimum
        lo_open = xlo and lo is not None
    elif isinstance(xlo, int | float) and (lo is None or xlo >= lo):
        lo, lo_open = xlo, True
    if isinstance(xhi, bool):
        hi_open = xhi and hi is not None
    elif isinstance(xhi, int | float) and (hi is None or xhi <= hi):
        hi, hi_open = xhi, True
    return lo, lo_open, hi, hi_open


def _closest_to_zero(lo: int | None, hi: int | None) -> int | None:
    if lo is not None and hi is not None and lo > hi:
        return None
    if lo is not None and lo > 0:
        return lo
    if hi is not None and hi < 0:
        return hi
    return 0


def _integer_example(schema: dict[str, Any]) -> int:
    lo, lo_open, hi, hi_open = _bounds(schema)
    low = None if lo is None else (math.floor(lo) + 1 if lo_open else math.ceil(lo))
    high = None if hi is None else (math.ceil(hi) - 1 if hi_open else math.floor(hi))
    step = schema.get("multipleOf")
    unit = 1
    if isinstance(step, int | float) and step > 0:
        from fractions import Fraction  # only here: it pulls in decimal at import time

        unit = Fraction(step).limit_denominator(10**9).numerator  # the integers that are multiples
    k = _closest_to_zero(None if low is None else -(-low // unit), None if high is None else high // unit)
    if k is None:
        raise UserError(f"schema_example: no integer satisfies {_numeric_constraints(schema)}")
    if abs(k * unit) >= _HUGE:
        raise UserError(
            f"schema_example: {_numeric_constraints(schema)} asks for an integer of over 300 digits"
        )
    return k * unit


def _number_example(schema: dict[str, Any]) -> float:
    lo, lo_open, hi, hi_open = _bounds(schema)
    step = schema.get("multipleOf")
    if isinstance(step, int | float) and step > 0:
        low = None if lo is None else math.floor(lo / step) + 1 if lo_open else math.ceil(lo / step)
        high = None if hi is None else math.ceil(hi / step) - 1 if hi_open else math.floor(hi / step)
        k = _closest_to_zero(low, high)
        if k is None:
            raise UserError(f"schema_example: no number satisfies {_numeric_constraints(schema)}")
        return float(k * step)
    fits_low = lo is None or lo < 0 or (lo == 0 and not lo_open)
    fits_high = hi is None or hi > 0 or (hi == 0 and not hi_open)
    if fits_low and fits_high:
        return 0.0
    if lo is not None and hi is not None:
        if lo > hi or (lo == hi and (lo_open or hi_open)):
            raise UserError(f"schema_example: no number satisfies {_numeric_constraints(schema)}")
        if lo_open or hi_open:
            return (lo + hi) / 2
        return float(lo if not fits_low else hi)
    if lo is not None:
        return float(lo + 1 if lo_open else lo)
    assert hi is not None
    return float(hi - 1 if hi_open else hi)


def _numeric_constraints(schema: dict[str, Any]) -> str:
    keys = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf")
    return ", ".join(f"{k}={_short(schema[k])}" for k in keys if k in schema) or "the schema"


def _short(value: object) -> str:
    if isinstance(value, int) and abs(value) >= _HUGE:
        return f"<an integer of {value.bit_length()} bits>"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_CLASS_ESCAPES: Mapping[str, Callable[[str], bool]] = MappingProxyType(
    {
        "d": lambda c: "0" <= c <= "9",
        "D": lambda c: not "0" <= c <= "9",
        "w": lambda c: c.isascii() and (c.isalnum() or c == "_"),
        "W": lambda c: not (c.isascii() and (c.isalnum() or c == "_")),
        "s": str.isspace,
        "S": lambda c: not c.isspace(),
    }
)
_SIMPLE_ESCAPES = MappingProxyType({"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0"})
_CANDIDATES = "a0A_ -." + "".join(chr(i) for i in range(33, 127))

# A parsed pattern: ("lit", text) | ("alt", [node]) | ("seq", [node]) | ("group", node, key)
# | ("rep", node, min, max) | ("ref", key) | ("empty",)
_Node: TypeAlias = tuple[Any, ...]


class _PatternParser:
    """Parses the regular-expression subset of JSON Schema ``pattern`` into a small tree whose
    character classes are already resolved to one member each."""

    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.groups = 0

    def fail(self, why: str) -> UserError:
        return UserError(f"schema_example: cannot use pattern {self.p[:80]!r}: {why} (at offset {self.i})")

    def peek(self) -> str:
        return self.p[self.i] if self.i < len(self.p) else ""

    def alternation(self) -> _Node:
        options = [self.sequence()]
        while self.peek() == "|":
            self.i += 1
            options.append(self.sequence())
        return options[0] if len(options) == 1 else ("alt", options)

    def sequence(self) -> _Node:
        items: list[_Node] = []
        while self.peek() not in ("", "|", ")"):
            atom = self.atom()
            items.append(self.quantified(atom))
        return ("seq", items)

    def quantified(self, atom: _Node) -> _Node:
        while True:
            c = self.peek()
            if c in ("*", "+", "?"):
                self.i += 1
                low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            elif c == "{":
                m = re.match(r"\{(\d*)(,?)(\d*)\}", self.p[self.i :])
                if m is None or not (m.group(1) or m.group(3)):
                    return atom
                self.i += m.end()
                low = int(m.group(1) or 0)
                high = int(m.group(3)) if m.group(3) else (None if m.group(2) else low)
            else:
                return atom
            if self.peek() in ("?", "+"):  # lazy or possessive: the same strings
                self.i += 1
            atom = ("rep", atom, low, high)

    def atom(self) -> _Node:
        c = self.p[self.i]
        self.i += 1
        if c == "(":
            return self.group()
        if c == "[":
            return ("lit", self.char_class())
        if c == ".":
            return ("lit", "a")
        if c in ("^", "$"):
            return ("empty",)
        if c == "\\":
            return self.escape()
        return ("lit", c)

    def group(self) -> _Node:
        key: int | str | None = None
        if self.p.startswith("?", self.i):
            rest = self.p[self.i + 1 :]
            flags = re.match(r"[aiLmsux-]*\)", rest)
            named = re.match(r"P?<([A-Za-z_]\w*)>", rest)
            ref = re.match(r"P=([A-Za-z_]\w*)\)", rest)
            if flags is not None:  # inline flags such as (?i): verification applies them
                self.i += 1 + flags.end()
                return ("empty",)
            if ref is not None:
                self.i += 1 + ref.end()
                return ("ref", ref.group(1))
            if rest[:2] in ("<=", "<!") or rest[:1] in ("=", "!"):  # lookaround: left to verification
                self.i += 1 + (2 if rest[0] == "<" else 1)
                self.alternation()
                self.expect_close()
                return ("empty",)
            if named is not None:
                self.groups += 1
                key = named.group(1)
                self.i += 1 + named.end()
            else:
                m = re.match(r"[aiLmsux-]*:", rest)
                if m is None:
                    raise self.fail("unsupported group syntax")
                self.i += 1 + m.end()
        else:
            self.groups += 1
            key = self.groups
        inner = self.alternation()
        self.expect_close()
        return ("group", inner, key)

    def expect_close(self) -> None:
        if self.peek() != ")":
            raise self.fail("unbalanced parenthesis")
        self.i += 1

    def escape(self) -> _Node:
        if self.i >= len(self.p):
            raise self.fail("a trailing backslash")
        c = self.p[self.i]
        self.i += 1
        if c in _CLASS_ESCAPES:
            return ("lit", self.pick([], [_CLASS_ESCAPES[c]], negated=False))
        if c in "bBAZzG":
            return ("empty",)
        if c.isdigit() and c != "0":
            return ("ref", int(c))
        return ("lit", self.escaped_char(c))

    def escaped_char(self, c: str) -> str:
        if c in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[c]
        width = {"x": 2, "u": 4}.get(c)
        if width is not None:
            digits = self.p[self.i : self.i + width]
            if len(digits) == width and all(d in "0123456789abcdefABCDEF" for d in digits):
                self.i += width
                return chr(int(digits, 16))
        if c in "pP" and self.peek() == "{":  # a Unicode property: a letter, left to verification
            self.i = self.p.index("}", self.i) + 1 if "}" in self.p[self.i :] else len(self.p)
            return "a"
        return c

    def char_class(self) -> str:
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        ranges: list[tuple[str, str]] = []
        tests: list[Callable[[str], bool]] = []
        first = True
        while True:
            if self.i >= len(self.p):
                raise self.fail("an unterminated character class")
            c = self.p[self.i]
            self.i += 1
            if c == "]" and not first:
                break
            first = False
            if c == "\\":
                if self.i >= len(self.p):
                    raise self.fail("a trailing backslash")
                e = self.p[self.i]
                self.i += 1
                if e in _CLASS_ESCAPES:
                    tests.append(_CLASS_ESCAPES[e])
                    continue
                c = "\b" if e == "b" else self.escaped_char(e)
            if self.peek() == "-" and self.p[self.i + 1 : self.i + 2] not in ("]", ""):
                self.i += 1
                end = self.p[self.i]
                self.i += 1
                if end == "\\":
                    end = self.escaped_char(self.p[self.i])
                    self.i += 1
                ranges.append((c, end))
            else:
                ranges.append((c, c))
        return self.pick(ranges, tests, negated=negated)

    def pick(
        self, ranges: list[tuple[str, str]], tests: list[Callable[[str], bool]], *, negated: bool
    ) -> str:
        def member(ch: str) -> bool:
            return any(lo <= ch <= hi for lo, hi in ranges) or any(t(ch) for t in tests)

        preferred = "" if negated else "".join(lo for lo, _ in ranges)
        for ch in preferred + _CANDIDATES:
            if member(ch) != negated:
                return ch
        raise self.fail("no character fits a character class")


def _generate(node: _Node, extra: int, groups: dict[int | str, str], work: _Budget) -> str:
    kind = node[0]
    if kind == "lit":
        work.take(len(node[1]), "the pattern")
        return node[1]
    if kind == "seq":
        return "".join(_generate(n, extra, groups, work) for n in node[1])
    if kind == "alt":
        return _generate(node[1][0], extra, groups, work)
    if kind == "group":
        text = _generate(node[1], extra, groups, work)
        if node[2] is not None:
            groups[node[2]] = text
        return text
    if kind == "rep":
        low, high = node[2], node[3]
        count = low + extra if high is None else min(high, low + extra)
        return "".join(_generate(node[1], extra, groups, work) for _ in range(count))
    if kind == "ref":
        text = groups.get(node[1], "")
        work.take(len(text), "the pattern")
        return text
    return ""


def pattern_example(pattern: str, min_length: int = 0, max_length: int | None = None) -> str:
    """A string matching the JSON Schema ``pattern`` (searched, not anchored, as JSON Schema
    does) whose length is within ``min_length``/``max_length``. Raises ``UserError`` when the
    pattern cannot be satisfied, is not a regular expression this function understands, or asks
    for more than ``EXAMPLE_LIMIT`` characters (a quantifier such as ``{30000000}``)."""
    if min_length > EXAMPLE_LIMIT:
        _Budget().take(min_length, f"minLength {min_length}")
    try:
        compiled = re.compile(re.sub(r"\(\?<(?![=!])", "(?P<", pattern))
    except re.error as exc:
        raise UserError(
            f"schema_example: pattern {pattern[:80]!r} is not a valid regular expression: {exc}"
        ) from None
    parser = _PatternParser(pattern)
    tree = parser.alternation()
    if parser.i != len(pattern):
        raise parser.fail("unbalanced parenthesis")

    def fits(text: str) -> bool:
        long_enough = len(text) >= min_length
        short_enough = max_length is None or len(text) <= max_length
        return long_enough and short_enough and compiled.search(text) is not None

    previous = None
    work = _Budget(_SEARCH_WORK, search=True)
    for extra in range(min_length + 2):
        text = _generate(tree, extra, {}, _Budget())
        work.take(len(text) + max(0, min_length - len(text)), f"a search for pattern {pattern[:40]!r}")
        if fits(text):
            return text
        if text == previous or (max_length is not None and len(text) > max_length):
            break
        previous = text
        need = min_length - len(text)
        for pad in ("a", " ", "0") if need > 0 else ():
            for padded in (pad * need + text, text + pad * need):
                if fits(padded):
                    return padded
    limits = f" with length {min_length}..{'' if max_length is None else max_length}"
    raise UserError(f"schema_example: cannot produce a string matching pattern {pattern[:80]!r}{limits}")
