"""Result tables as plain data: what `eval`, `diagnose` and `adapt` show, built by the library, drawn by anyone.

The library decides the content — rows, labels, number formats, which Δ is good news — and marks each cell with a
*tone* instead of a colour. The CLI draws a `TextTable` with rich (tones become colours); a notebook or a log gets
the same table as aligned plain text from `str(table)`. No terminal code here, standard library only.
"""

from __future__ import annotations

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

    def column(self, header: str, right: bool = False, fold: bool = False, whole: bool = False) -> None:
        self.columns.append(Column(header, right, fold, whole))

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
