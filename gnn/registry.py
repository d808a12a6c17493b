"""One name -> entry table per extension point (layer types in ``gnn.models.CONVS``, architectures in
``quant.archs.ARCHS``): registered in order, read like a dict, a second entry under a taken name refused. Pure
Python, so numpy-only readers (``quant.archs`` under ``hw/``) can use it without torch."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
    """Entries of one kind (``kind`` names it in messages), looked up by name in registration order."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> T:
        """Add ``entry`` as ``name``; ValueError if another entry already has that name."""
        if name in self._entries and self._entries[name] is not entry:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove ``name`` if registered (tests that add a toy entry clean up with this)."""
        self._entries.pop(name, None)

    def lookup(self, name: str) -> T:
        """The entry of ``name``; ValueError naming the registered ones otherwise."""
        if name not in self._entries:
            raise ValueError(f"unknown {self.kind} {name!r}; known: {', '.join(self._entries)}")
        return self._entries[name]

    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
