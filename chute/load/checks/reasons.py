"""The careful passes' SQL: each column's converted value, and why a row is bad."""

from __future__ import annotations

from chute.load.checks.column import array_element, conversion, default_of, read_as_text, strip_wrappers
from chute.schema import Column
from chute.sql import internal, quote_ident, quote_str


def value_at(i: int) -> str:
    """The checked records' column of the i-th input column's converted value (chute.sql.internal)."""
    return internal(f"v{i}")


def present_at(i: int) -> str:
    """The checked records' flag: the i-th input column (one with a DEFAULT expression) had a value."""
    return internal(f"p{i}")


def nested_groups(columns: list[Column]) -> list[list[int]]:
    """Indexes of the array columns that share a `name.` prefix (a Nested structure): the engine
    refuses a row whose arrays there differ in length, and with it the whole insert."""
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(columns):
        if "." in c.name and strip_wrappers(c.type)[0].startswith("Array("):
            groups.setdefault(c.name.split(".", 1)[0], []).append(i)
    return [members for members in groups.values() if len(members) > 1]


def nested_reasons(columns: list[Column], lengths: list[str]) -> list[str]:
    """multiIf arms: the arrays of a Nested structure differ in length (`lengths`: SQL of
    each column's array length)."""
    parts = []
    for members in nested_groups(columns):
        first = members[0]
        differ = " OR ".join(f"{lengths[i]} != {lengths[first]}" for i in members[1:])
        names = ", ".join(columns[i].name for i in members)
        structure = columns[first].name.split(".")[0]
        parts += [differ, quote_str(f"the arrays of Nested {structure} ({names}) differ in length")]
    return parts


def multi_if(parts: list[str]) -> str:
    return f"multiIf({', '.join(parts)}, '')" if parts else "''"


def finals(columns: list[Column], texts: list[str], present: list[str], extract: list[str]) -> list[str]:
    """Converted value of each column, and the condition that it is bad."""
    finals = []
    for i, col in enumerate(columns):
        conv = conversion(texts[i], col.type)
        _, nullable = strip_wrappers(col.type)
        if conv is None:
            value = extract[i]
        elif nullable:
            value = f"if({present[i]}, {conv}, NULL)"
        elif array_element(strip_wrappers(col.type)[0]) is not None:
            value = f"if({present[i]}, ifNull({conv}, '[]'), '[]')"  # (the array's text)
        else:
            # (ifNull, not assumeNotNull: under a NULL may lie the text that did not fit)
            default = default_of(strip_wrappers(col.type)[0])
            value = f"if({present[i]}, ifNull({conv}, {default}), {default})"
        finals.append(f"CAST({value}, {quote_str(col.type)}) AS {value_at(i)}")
    return finals


def bad_conditions(columns: list[Column], texts: list[str], present: list[str]) -> list[str]:
    parts = []
    for i, col in enumerate(columns):
        conv = conversion(texts[i], col.type)
        if conv is None or conv == texts[i]:
            continue
        inner = strip_wrappers(col.type)[0]
        shown = f"if(empty({texts[i]}), '\"\"', substring({texts[i]}, 1, 200))"
        message = f"concat({quote_str(f'column {col.name}: ')}, {shown}, {quote_str(' does not fit ' + inner)})"
        parts.append(f"{present[i]} AND ({conv}) IS NULL, {message}")
    return parts


def range_reasons(columns: list[Column]) -> str:
    """SQL over a row the engine parsed with checked types as text (`read_type`): why its
    values do not fit their columns ('' when they do)."""
    reasons = [
        f"if(isNotNull({quote_ident(c.name)}) AND ({conversion(quote_ident(c.name), c.type)}) IS NULL, "
        f"concat({quote_str(f'column {c.name}: ')}, if(empty({quote_ident(c.name)}), '\"\"', {quote_ident(c.name)}), "
        f"{quote_str(' does not fit ' + strip_wrappers(c.type)[0])}), '')"
        for c in columns
        if read_as_text(c.type)
    ]
    return f"arrayStringConcat(arrayFilter(x -> x != '', [{', '.join(reasons)}]), '; ')" if reasons else "''"
