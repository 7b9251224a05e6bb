"""Result tables as plain data: what `eval`, `diagnose` and `adapt` show, built by the library, drawn by anyone.

The library decides the content — rows, labels, number formats, which Δ is good news — and marks each cell with a
*tone* instead of a colour. The CLI draws a `TextTable` with rich (tones become colours); a notebook or a log gets
the same table as aligned plain text from `str(table)`. No terminal code here, standard library only.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

GOOD, BAD, DIM, STRONG, BEST, WARN = "good", "bad", "dim", "strong", "best", "warn"  # the tones a cell may carry


@dataclass(frozen=True)
class Cell:
    text: str
    tone: str = ""  # "" | good | bad | dim | strong | best | warn


@dataclass(frozen=True)
class Column:
    header: str
    right: bool = False  # numbers are right-aligned
    fold: bool = False  # a long value (a path) folds onto the next line on a narrow terminal instead of ending in …
    whole: bool = False  # never wrapped or cut (a name the user types back): the other columns give way
    name: bool = False  # a model's name: shortened by `shorten_name` to the room left (fit), never broken mid-word


@dataclass
class Row:
    cells: list[Cell]
    tone: str = ""  # a tone for the whole row (dim: detail rows such as subsets)
    section_end: bool = False  # a rule after this row


@dataclass
class TextTable:
    title: str
    columns: list[Column] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    caption: str | None = None
    show_header: bool = True

    def column(self, header: str, right: bool = False, fold: bool = False, whole: bool = False,
               name: bool = False) -> None:
        self.columns.append(Column(header, right, fold, whole, name))

    def row(self, *cells: str | Cell, tone: str = "", section_end: bool = False) -> None:
        self.rows.append(Row([c if isinstance(c, Cell) else Cell(c) for c in cells], tone, section_end))

    def __str__(self) -> str:
        """Aligned plain text: the title, the header, one line per row (a column header's line breaks become
        spaces)."""
        headers = [c.header.replace("\n", " ") for c in self.columns]
        body = [[cell.text for cell in row.cells] for row in self.rows]
        lines = [headers] if self.show_header else []
        widths = [max(len(line[i]) for line in [*lines, *body] if i < len(line)) for i in range(len(self.columns))]

        def draw(texts: list[str]) -> str:
            return "  ".join(text.rjust(width) if column.right else text.ljust(width)
                             for text, width, column in zip(texts, widths, self.columns)).rstrip()

        out = [self.title] + [draw(texts) for texts in [*lines, *body]]
        return "\n".join(out + ([self.caption] if self.caption else []))


def signed(value: float) -> Cell:
    """A change: '+0.42' (good), '-0.10' (bad), '+0.00'."""
    return Cell(f"{value:+.2f}", GOOD if value > 0 else BAD if value < 0 else "")


# ------------------------------------------------------------------------------------- fitting a terminal's width
NAME_FLOOR = 8  # a shortened name keeps at least this many characters, however narrow its numbers
LABEL_SHARE = 24  # a label column (a figure's name) is counted this wide when names share the width left
NUMBER = re.compile(r"[-+−\d.,\[\]\s*★—%]*")  # a value, an interval, a Δ with its * or ★ (not a sparkline)


def fit(table: TextTable, width: int) -> TextTable:
    """The table as drawn `width` characters wide: itself when it fits; else a copy where an interval moves under
    its value ("76.04" above "[72.10, 80.00]") and the name in a number column's header (a model's path) is
    shortened — names give way, numbers are never cut (label columns wrap where they are drawn)."""
    if _natural_width(table) <= width:
        return table
    starred = [any(line.endswith(("*", "★")) for row in table.rows if index < len(row.cells)
                   for line in row.cells[index].text.split("\n")) for index in range(len(table.columns))]
    rows = [dataclasses.replace(row, cells=[Cell(_interval_below(cell.text, keep_room=starred[index]), cell.tone)
                                            if column.right else cell
                                            for index, (cell, column) in enumerate(zip(row.cells, table.columns))])
            for row in table.rows]
    fitted = dataclasses.replace(table, rows=rows)
    # the one rule for a model's name: first the fewest path components that tell the table's models apart
    # (short_names), then, where even that is too wide, `shorten_name` to the room below
    named = short_names([column.header.split("\n")[0] for column in table.columns if column.right])
    fitted.columns = [dataclasses.replace(column, header="\n".join([named[column.header.split("\n")[0]],
                                                                     *column.header.split("\n")[1:]]))
                      if column.right else column for column in table.columns]
    share = _name_share(fitted, width)
    headers = list(fitted.columns)
    limits = {i: max(widest(fitted, i), share, *(len(line) for line in column.header.split("\n")[1:]))
              for i, column in enumerate(headers) if column.right}
    for pick in (max, min):  # a name shortened alike in every column it heads: the widest room when it fits
        by_name: dict[str, list[int]] = {}
        for i in limits:
            by_name.setdefault(headers[i].header.split("\n")[0], []).append(limits[i])
        fitted.columns = [dataclasses.replace(column, header=_shorten_header(column.header, pick(
            by_name[column.header.split("\n")[0]]))) if i in limits else column for i, column in enumerate(
            headers)]
        if _natural_width(fitted) <= width:
            break
    return _shorten_name_cells(fitted, width)


def _shorten_name_cells(table: TextTable, width: int) -> TextTable:
    """Name columns (a model's name in each row) shortened by `shorten_name` to the room the other columns leave
    (labels counted at LABEL_FLOOR or their header's longest word), then drawn whole: a name is never broken."""
    names = [index for index, column in enumerate(table.columns) if column.name]
    if not names:
        return table
    others = sum(min_width(table, index, True) or max(min(widest(table, index), LABEL_FLOOR), *(
        len(word) for word in column.header.split())) for index, column in enumerate(table.columns)
        if index not in names)
    room = max(NAME_FLOOR, (width - 3 * len(table.columns) - 1 - others) // len(names))
    rows = [dataclasses.replace(row, cells=[Cell(shorten_name(cell.text, room), cell.tone) if index in names else cell
                                            for index, cell in enumerate(row.cells)]) for row in table.rows]
    columns = [dataclasses.replace(column, whole=True) if column.name else column for column in table.columns]
    return dataclasses.replace(table, rows=rows, columns=columns)


LABEL_FLOOR = 8  # a label column wraps: counted at most this wide when a table's least width is reckoned


def least_width(table: TextTable, width: int) -> int:
    """The narrowest the table can be drawn once fitted to `width` (fit): its numbers whole, its names shortened, its
    labels wrapped to LABEL_FLOOR; more than `width` means some column would be cut."""
    fitted = fit(table, width)
    widths = [min_width(fitted, index, fitted is not table) or min(widest(fitted, index), LABEL_FLOOR)
              for index in range(len(fitted.columns))]
    return sum(widths) + 3 * len(widths) + 1


def min_width(table: TextTable, index: int, shortened: bool) -> int | None:
    """How narrow a column may be drawn: a whole column its widest cell, a number column its widest number (and,
    once names were shortened, its header's name); None: as narrow as the layout needs."""
    column = table.columns[index]
    if not (column.whole or column.right):
        return None
    least = widest(table, index, numbers_only=not column.whole)
    return max(least, *(len(line) for line in column.header.split("\n"))) if shortened else least


def only_numbers(table: TextTable, index: int) -> bool:
    """Every line of the column's cells is a number, an interval or a Δ (no sparkline, no word)."""
    return all(NUMBER.fullmatch(line) for row in table.rows if index < len(row.cells)
               for line in row.cells[index].text.split("\n"))


def widest(table: TextTable, index: int, numbers_only: bool = False) -> int:
    """The widest line of a column's cells (`numbers_only`: of its numbers, not a sparkline beside them)."""
    return max((len(line) for row in table.rows if index < len(row.cells) for line in row.cells[index].text.split(
        "\n") if not numbers_only or NUMBER.fullmatch(line)), default=0)


def _natural_width(table: TextTable) -> int:
    """The width the table needs unwrapped: each column's widest line, its padding and a rule."""
    widths = [max(max(len(line) for line in column.header.split("\n")), widest(table, index))
              for index, column in enumerate(table.columns)]
    return sum(widths) + 3 * len(widths) + 1


def _interval_below(text: str, keep_room: bool = True) -> str:
    """An interval under its value; without `keep_room` (no row of the column is starred) the two spaces that keep an
    unstarred Δ's bracket under a starred one's go: they cost a narrow table its last column."""
    value, sep, interval = text.partition(" [")
    moved = f"{value}\n[{interval}" if sep else text
    return moved if keep_room else "\n".join(line.rstrip() for line in moved.split("\n"))


def _name_share(table: TextTable, width: int) -> int:
    """How wide a number column's name may be: the width left after the padding and the label columns (each counted
    at most LABEL_SHARE wide: they wrap), shared by the number columns; at least NAME_FLOOR."""
    labels = sum(min(widest(table, i), LABEL_SHARE) for i, column in enumerate(table.columns) if not column.right)
    numbers = sum(column.right for column in table.columns)
    return max(NAME_FLOOR, (width - 3 * len(table.columns) - 1 - labels) // max(1, numbers))


def _shorten_header(header: str, limit: int) -> str:
    """The header's name (its first line: a model's path) shortened; a label under it ("[norm]", "[mean]") stays
    whole."""
    name, *labels = header.split("\n")
    return "\n".join([shorten_name(name, limit), *labels])


SHORT_NAME = 24  # a model's name longer than this is shown by its last path components (the lines above the table
# name each model in full)


def short_names(names: Sequence[str]) -> dict[str, str]:
    """Each model's name as a table row shows it: whole when short, else its last path components, as few as keep
    the names apart ("/work/models/paraphrase-minilm-l3-v2" → "paraphrase-minilm-l3-v2"), so a narrow column shows
    the folder's own name, not the path's first characters."""
    distinct = list(dict.fromkeys(names))
    parts = {name: [part for part in name.replace("\\", "/").split("/") if part] or [name] for name in distinct}
    shown: dict[str, str] = {}
    for name in distinct:
        count = 1
        while True:
            tail = "/".join(parts[name][-count:])
            clash = any(other != name and "/".join(parts[other][-count:]) == tail for other in distinct)
            if len(name) <= SHORT_NAME or count >= len(parts[name]):
                shown[name] = name
                break
            if not clash:
                shown[name] = tail
                break
            count += 1
    return shown


def model_label(name: str) -> str:
    """One model's name as a line or a cell shows it: `short_names` of it alone (a local folder by its own name)."""
    return short_names([name])[name]


def shorten_name(name: str, limit: int) -> str:
    """A name (a model's path) in at most `limit` characters: its last path components ("…/runs/x"), else the last
    component with an ellipsis in the middle ("paraphr…-l3-v2")."""
    if len(name) <= limit:
        return name
    parts = [part for part in name.replace("\\", "/").split("/") if part]
    for count in range(len(parts) - 1, 0, -1):
        tail = "…/" + "/".join(parts[-count:])
        if len(tail) <= limit:
            return tail
    last = parts[-1] if parts else name
    if len(last) <= limit:
        return last
    keep = limit - 1
    return last[: (keep + 1) // 2] + "…" + last[len(last) - keep // 2:]


def some_of(names: list[str], noun: str = "files", shown: int = 3) -> str:
    """Names joined by commas; of a longer list the first `shown` and how many more (a corpus folder of 481 files is
    one line of a summary or a message, not 160)."""
    if len(names) <= shown + 1:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more {noun}"


def unwrapped(text: str) -> str:
    """A docstring's paragraphs each on one line (a line starting with a space or a list mark stays its own): rich
    keeps a help paragraph's line breaks after the first, so a docstring line that ends before the terminal's width
    ended the help line there, mid-sentence ("… disagree, each⏎with its weight")."""
    paragraphs = []
    for paragraph in text.split("\n\n"):
        lines: list[str] = []
        for line in paragraph.split("\n"):
            if lines and line.strip() and not line.startswith((" ", "-", "*", "•")):
                lines[-1] = f"{lines[-1].rstrip()} {line.strip()}"
            else:
                lines.append(line)
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)
