"""How the CLI shows things: tables that fit the terminal, wrapped text, dates, and the data
formats (JSON, YAML, CSV). Every rule about presentation lives here; the command modules say
only which columns a table has and how much each matters.

Tables fit the width of the terminal (a pipe or a file: ``$COLUMNS``, else 80). A column is
*key* (``priority=0``: always shown) or droppable; when the table is too wide the droppable
columns go first, the highest ``priority`` number first, and a note says what was left out.
Ids are never cut: a cell is wrapped or folded onto a second line, never truncated with "…".
``--output json|yaml|csv`` never look at the terminal.
"""

from __future__ import annotations

import csv
import io
import json
import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, get_origin

from pydantic import BaseModel
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table


class Output(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"
    csv = "csv"


def stdout() -> Console:
    """The console tables are printed on. Not a terminal: ``$COLUMNS`` wide, else 80 (Rich's
    rule), so a pipe or a file gets the same layout an 80-column terminal does."""
    return Console(highlight=False)


# -- cells ------------------------------------------------------------------------------------


def cell(value: Any) -> str:
    """A value as a table or CSV cell: lists joined with ";", booleans lower case, nothing
    for ``None``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ";".join(cell(v) for v in value)
    if isinstance(value, dict):
        return ";".join(f"{k}={cell(v)}" for k, v in sorted(value.items()))
    return str(value)


def when(value: datetime | None) -> str:
    """A UTC instant to the minute (``2026-11-23 20:51``): a narrow column wraps it at the
    space, date above time."""
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def number(value: float | None, unit: str = "") -> str:
    return "" if value is None else f"{value:g}{unit}"


def money(value: float | None, currency: str | None = None) -> str:
    return "" if value is None else f"{value:,.2f} {currency or ''}".strip()


def yes_no(value: bool | None) -> str:
    return {True: "yes", False: "no", None: "unknown"}[value]


# -- tables that fit --------------------------------------------------------------------------


@dataclass(frozen=True)
class Col:
    """A table column. ``priority`` 0 is key (always shown); higher numbers are dropped first
    when the terminal is too narrow. ``wrap``: the cell may break at its spaces (dates, lists);
    an ``ident`` is never broken unless the terminal is narrower than the id itself."""

    header: str
    priority: int = 0
    numeric: bool = False
    wrap: bool = False
    ident: bool = False


# Space between columns: two when the table fits with them, else one.
GAPS = (2, 1)


@dataclass(frozen=True)
class Layout:
    """Which columns are shown, at which widths, with which gap, and which were left out."""

    shown: list[int]
    widths: list[int]
    gap: int
    hidden: list[str]

    @property
    def width(self) -> int:
        return sum(self.widths) + self.gap * max(len(self.widths) - 1, 0)


def _natural(col: Col, cells: Sequence[str]) -> int:
    return max([len(col.header), *(len(c) for c in cells)])


def _least(col: Col, cells: Sequence[str]) -> int:
    """The narrowest a column gets before a word (or an id) would have to be broken."""
    if not col.wrap:
        return _natural(col, cells)
    words = [w for text in (col.header, *cells) for w in text.split()]
    return max([1, *(len(w) for w in words)])


def fit(cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int) -> Layout:
    """The layout of a table ``width`` characters wide.

    Columns are dropped in priority order (the highest number first, the rightmost of a tie)
    until the rest fit on one line each, with two spaces between columns or else one. When
    even the key columns do not fit, wrapping columns (dates) break at their spaces, and only
    then does anything else fold.
    """
    by_column = [[row[i] for row in rows] for i in range(len(cols))]
    natural = [_natural(c, by_column[i]) for i, c in enumerate(cols)]
    least = [_least(c, by_column[i]) for i, c in enumerate(cols)]
    order = sorted(
        (i for i, c in enumerate(cols) if c.priority > 0),
        key=lambda i: (cols[i].priority, i),
        reverse=True,
    )
    # A droppable column with nothing in it is left out without a word.
    blank = {i for i, c in enumerate(cols) if c.priority > 0 and not any(by_column[i])}
    order = [i for i in order if i not in blank]
    shown = [i for i in range(len(cols)) if i not in blank]

    def total(indices: Sequence[int], sizes: Sequence[int], gap: int) -> int:
        return sum(sizes[i] for i in indices) + gap * max(len(indices) - 1, 0)

    for candidate in [shown] + [
        [i for i in shown if i not in order[: n + 1]] for n in range(len(order))
    ]:
        for gap in GAPS:
            if total(candidate, natural, gap) <= width:
                return _layout(cols, candidate, [natural[i] for i in candidate], gap, blank)
    # Even the key columns are too wide: narrow the wrapping ones, widest first.
    keep = [i for i in shown if i not in order]
    gap = GAPS[-1]
    widths = {i: natural[i] for i in keep}
    excess = total(keep, natural, gap) - width
    for limit in (least, None):
        while excess > 0:
            candidates = [
                i
                for i in keep
                if (limit is not None and cols[i].wrap and widths[i] > least[i])
                or (limit is None and widths[i] > 1 and not cols[i].ident)
            ]
            if not candidates:
                break
            widest = max(candidates, key=lambda i: widths[i])
            widths[widest] -= 1
            excess -= 1
    while excess > 0 and any(widths[i] > 1 for i in keep):  # an id folds only here
        widest = max(keep, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return _layout(cols, keep, [widths[i] for i in keep], gap, blank)


def _layout(
    cols: Sequence[Col], shown: list[int], widths: list[int], gap: int, blank: set[int]
) -> Layout:
    hidden = [c.header for i, c in enumerate(cols) if i not in shown and i not in blank]
    return Layout(shown=shown, widths=widths, gap=gap, hidden=hidden)


def print_table(
    console: Console,
    cols: Sequence[Col],
    rows: Sequence[Sequence[Any]],
    title: str | None = None,
) -> Layout:
    """Print ``rows`` as a table that fits ``console``; say which columns did not fit."""
    cells = [[cell(v) for v in row] for row in rows]
    layout = fit(cols, cells, console.width)
    table = Table(
        title=escape(title) if title else None,
        title_justify="left",
        title_style="bold",
        header_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1) if layout.gap == 2 else (0, 0),
        collapse_padding=True,
    )
    for index, width in zip(layout.shown, layout.widths, strict=True):
        col = cols[index]
        table.add_column(
            escape(col.header),
            justify="right" if col.numeric else "left",
            width=width,
            overflow="fold",
            no_wrap=False,
        )
    for row in cells:
        table.add_row(*(escape(row[i]) for i in layout.shown))
    console.print(table)
    if layout.hidden:
        say(
            console,
            f"({', '.join(layout.hidden)} left out to fit {console.width} columns; a wider "
            "terminal or --output json shows them)",
            style="dim",
        )
    return layout


def say(
    console: Console, text: str, indent: int = 0, hang: int = 0, style: str | None = None
) -> None:
    """A line of prose, wrapped to the console with a hanging indent (no mid-word breaks)."""
    lines = textwrap.wrap(
        text,
        width=max(console.width, 20),
        initial_indent=" " * indent,
        subsequent_indent=" " * (indent + hang),
        break_long_words=False,
        break_on_hyphens=False,
    ) or [""]
    for line in lines:
        console.print(escape(line), soft_wrap=True, style=style)


def regions_text(regions: Sequence[str]) -> str:
    """``us-east-1, us-west-2 (2 regions)``: where a listing looked."""
    count = len(regions)
    names = ", ".join(regions) or "no region"
    return f"{names} ({count} region{'s' if count != 1 else ''})" if count > 1 else names


# -- data: JSON, YAML, CSV --------------------------------------------------------------------

# The seed documents' names for fields the contract spells otherwise; rows carry both.
SEED_NAMES: Mapping[str, tuple[str, ...]] = {
    "CapacityRow": ("instance_count",),
}


def row(model: BaseModel) -> dict[str, Any]:
    """One listing row as data: every field of its model, ``null`` when unknown, so every row
    of a listing carries the same keys; plus the seed documents' names."""
    data: dict[str, Any] = model.model_dump(mode="json")
    for name in SEED_NAMES.get(type(model).__name__, ()):
        data[name] = getattr(model, name)
    return data


def columns_of(model: type[BaseModel]) -> list[str]:
    """A listing's CSV columns: its model's fields, then the seed documents' names (a dict
    field such as ``tags`` comes as one column per key instead)."""
    fields = [
        name
        for name, info in model.model_fields.items()
        if (get_origin(info.annotation) or info.annotation) is not dict
    ]
    return fields + list(SEED_NAMES.get(model.__name__, ()))


def plain(data: Any) -> Any:
    """Models as data: a list of rows (see :func:`row`), or one answer (its JSON form)."""
    if isinstance(data, list):
        return [row(item) if isinstance(item, BaseModel) else plain(item) for item in data]
    if isinstance(data, BaseModel):
        return data.model_dump(mode="json", exclude_none=True)
    return data


def write_data(data: Any, output: Output) -> None:
    """JSON or YAML of a list (``[]`` when empty) or of one answer object."""
    value = plain(data)
    if output is Output.json:
        sys.stdout.write(json.dumps(value, indent=2) + "\n")
    elif output is Output.yaml:
        import yaml

        sys.stdout.write(yaml.safe_dump(value, sort_keys=False, allow_unicode=True))
    else:
        raise ValueError(f"not a data format: {output}")
    sys.stdout.flush()


def flatten(item: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested objects as dotted columns (``reservation.id``); lists of objects are rows of
    their own (see :func:`write_csv`), lists of values one ``;``-joined cell."""
    flat: dict[str, Any] = {}
    for key, value in item.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def write_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] = ()) -> None:
    """CSV with a header (the header alone for no rows): ``columns`` first, then every other
    key in the order rows bring them. Cells hold values, never JSON."""
    flat = [flatten(r) for r in rows]
    names = list(columns)
    for item in flat:
        names.extend(k for k in item if k not in names)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    for item in flat:
        writer.writerow({k: cell(item.get(k)) for k in names})
    sys.stdout.write(buffer.getvalue())
    sys.stdout.flush()


def answer_rows(answer: Mapping[str, Any], lists: Sequence[str]) -> list[dict[str, Any]]:
    """An answer as CSV rows: one per item of its ``lists`` (``attempts``, ``cancelled``...),
    each with the answer's own fields (``status``, ``request_id``...) beside the item's, under
    a ``kind`` column naming the list; the answer alone when every list is empty."""
    own = {k: v for k, v in answer.items() if k not in lists}
    found: list[dict[str, Any]] = []
    for name in lists:
        for item in answer.get(name) or []:
            fields = item if isinstance(item, Mapping) else {"id": item}
            found.append({**own, "kind": name, **{f"{name}.{k}": v for k, v in fields.items()}})
    return found or [own]


# -- listings ---------------------------------------------------------------------------------


def listing(
    output: Output,
    model: type[BaseModel],
    rows: Sequence[BaseModel],
    regions: Sequence[str],
    empty: str,
    cols: Sequence[Col],
    cells: Sequence[Sequence[Any]],
    title: str | None = None,
) -> None:
    """A listing command's output: its table, or a line saying nothing matched and where it
    looked; or the rows as data (``[]`` when empty; CSV: the header alone)."""
    if output is Output.table:
        out = stdout()
        if rows:
            print_table(out, cols, cells, title)
        else:
            say(out, f"{empty} in {regions_text(regions)}." if regions else f"{empty}.")
    elif output is Output.csv:
        write_csv(plain(list(rows)), columns_of(model))
    else:
        write_data(list(rows), output)
