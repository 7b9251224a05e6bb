"""A name → object registry whose lookups suggest the closest names on a typo."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from sentadapt.errors import ConfigError

T = TypeVar("T")


def unknown_name_message(kind: str, name: str, available: list[str]) -> str:
    """"Unknown task 'stsx'. Did you mean: sts1? Available: ..." — shared by every name lookup."""
    close = difflib.get_close_matches(name, available, n=3, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return f"Unknown {kind} '{one_line(name)}'.{hint} Available: {', '.join(sorted(available))}"


def one_line(text: str) -> str:
    """User text quoted in an error: newlines and other control characters escaped, so errors stay one line."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class Registry(Generic[T]):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(item: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} '{name}' is already registered")
            self._items[name] = item
            return item

        return decorator

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise ConfigError(unknown_name_message(self.kind, name, list(self._items))) from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
