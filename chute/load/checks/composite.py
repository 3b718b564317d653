"""Arrays, maps and tuples: the elements of an array of checked types are checked as the scalars
are (`[300]` into Array(UInt8) is [44] to the engine's readers), and the arrays of a Nested
structure must be of one length. Tuple and map elements are not checked (the report names them)."""

from __future__ import annotations

from collections.abc import Callable

from chute.load.checks.types import FAIL_MESSAGE, INT_RE, FastRead, array_element, default_of, strip_wrappers
from chute.schema import Column
from chute.sql import quote_str

Conversion = Callable[[str, str], "str | None"]
"""A scalar's conversion (column.conversion): SQL of the String text as the type, NULL where it does not fit."""


def array_conversion(text: str, element: str, convert: Conversion, depth: int = 0) -> str:
    """Nullable(String): the text of Array(`element`) converted exactly from `text`, NULL where
    it is no array or an element does not fit (CAST to the array type reads it back exactly).

    `text` is JSON, or the engine's text format of a CSV/TSV field, whose quotes are made JSON's
    (checked elements are numbers, dates and times: they hold no quote). A `null` element is
    NULL, or the element's default where it cannot be NULL, as the engine's reader has it.
    `convert` converts a scalar element."""
    x = f"__e{depth}"
    # (the text format writes NULL; its quotes are single)
    quoted = f"replaceAll(ifNull({text}, ''), {quote_str(chr(39))}, {quote_str(chr(34))})"
    as_json = f"replaceRegexpAll({quoted}, '\\\\bNULL\\\\b', 'null')"
    elements = f"JSONExtractArrayRaw({as_json})"
    inner, nullable = strip_wrappers(element)
    sub = array_element(inner)
    if sub is not None:
        conv = array_conversion(x, sub, convert, depth + 1)
        value = f"CAST(ifNull({conv}, '[]'), {quote_str(inner)})"
    else:
        unquoted = f"if(startsWith({x}, {quote_str(chr(34))}), JSONExtractString({x}), {x})"
        scalar = convert(unquoted, element)
        assert scalar is not None
        conv = scalar
        value = conv if nullable else f"assumeNotNull({conv})"
    null = "NULL" if nullable else default_of(inner)
    fits = (
        f"isValidJSON({as_json}) AND JSONType({as_json}) = 'Array' "
        f"AND arrayAll({x} -> {x} = 'null' OR isNotNull({conv}), {elements})"
    )
    return f"if({fits}, toString(arrayMap({x} -> if({x} = 'null', {null}, {value}), {elements})), NULL)"


def refused_element(inner: str) -> str | None:
    """The element type of an Array whose elements the readers refuse rather than change
    (FixedString too long, an unknown Enum name), else None: read as the array type, one such
    element fails the whole read, so the careful passes convert them too (`refused_conversion`)."""
    if inner.startswith("Array(") and inner.endswith(")"):
        element = inner[len("Array(") : -1].strip()
        if strip_wrappers(element)[0].startswith(("FixedString(", "Enum")):
            return element
    return None


def refused_conversion(text: str, element: str, convert: Conversion) -> str:
    """Nullable(String): the text of Array(`element`) (a `refused_element`) from `text`, NULL where
    it is no array or an element does not fit. `text` is JSON (its elements JSON strings) or the
    engine's text format of a CSV/TSV field (`['it\\'s']`), parsed by the engine's own reader
    through a Variant cast, which falls back to String where the text is no array."""
    x = "__f"
    raw = f"ifNull({text}, '')"
    is_json = f"(isValidJSON({raw}) AND JSONType({raw}) = 'Array')"
    from_json = (
        f"arrayMap({x} -> if({x} = 'null', NULL, if(startsWith({x}, {quote_str(chr(34))}), "
        f"JSONExtractString({x}), {x})), JSONExtractArrayRaw({raw}))"
    )
    variant = f"CAST({raw}, 'Variant(Array(Nullable(String)), String)')"
    from_text = f"variantElement({variant}, 'Array(Nullable(String))')"
    is_array = f"({is_json} OR variantType({variant}) != 'String')"
    parsed = f"if({is_json}, {from_json}, {from_text})"
    inner, nullable = strip_wrappers(element)
    conv = convert(x, inner)
    assert conv is not None
    null, kept = ("NULL", conv) if nullable else (default_of(inner), f"assumeNotNull({conv})")
    value = f"if(isNull({x}), {null}, {kept})"
    fits = f"{is_array} AND arrayAll({x} -> isNull({x}) OR isNotNull({conv}), {parsed})"
    return f"if({fits}, toString(arrayMap({x} -> {value}, {parsed})), NULL)"


def int_array_read(ident: str, type_sql: str, inner: str, message: str = FAIL_MESSAGE) -> FastRead | None:
    """An array (at any depth) of integers of up to 64 bits, read with Int128 elements and cast
    exactly, as a plain integer is (the text read of `text_array_read` costs twice the load);
    None for other elements."""
    depth, element = 0, inner
    while element.startswith("Array("):
        depth, element = depth + 1, element[len("Array(") : -1].strip()
    base, nullable = strip_wrappers(element)
    match = INT_RE.match(base)
    if not match or int(match.group(1)) > 64 or element.startswith("LowCardinality("):
        return None
    wide = "Nullable(Int128)" if nullable else "Int128"
    for _ in range(depth):
        wide = f"Array({wide})"
    flat = ident if depth == 1 else f"arrayFlatten({ident})"
    exact = f"accurateCastOrNull(x, {quote_str(base)})"
    fits = f"arrayAll(x -> {'isNull(x) OR ' if nullable else ''}isNotNull({exact}), {flat})"
    checked_value = f"if(throwIf(NOT {fits}, {message}) = 0, {ident}, {ident})"
    return FastRead(
        wide,
        f"CAST({checked_value}, {quote_str(type_sql)})",
        fits,
        f"if({fits}, CAST({ident}, {quote_str(type_sql)}), CAST([], {quote_str(type_sql)}))",
    )


def text_array_read(type_sql: str, json: bool, conv: str, absent: str) -> FastRead:
    """An array of checked elements, read as its text (JSON's raw array; the text format of a
    CSV/TSV field) and converted element by element (`conv`: its `array_conversion`); a missing
    one (`absent`: SQL that it is) is empty."""
    fits = f"bitOr({absent}, isNotNull({conv}))"
    value = f"ifNull({conv}, '[]')"
    checked_value = f"if(throwIf({fits} = 0, {FAIL_MESSAGE}) = 0, {value}, '[]')"
    return FastRead(
        "Nullable(String)" if json else "String",
        f"CAST({checked_value}, {quote_str(type_sql)})",
        f"({fits} != 0)",
        f"CAST(if({fits}, {value}, '[]'), {quote_str(type_sql)})",
    )


def nested_groups(columns: list[Column]) -> list[list[int]]:
    """Indexes of the array columns that share a `name.` prefix (a Nested structure): the engine
    refuses a row whose arrays there differ in length, and with it the whole insert."""
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(columns):
        if "." in c.name and strip_wrappers(c.type)[0].startswith("Array("):
            groups.setdefault(c.name.split(".", 1)[0], []).append(i)
    return [members for members in groups.values() if len(members) > 1]
