"""Results about one filter, worked out once and shared by the compiles of a whole network.

Routing hands every switch of a network a slice of the same filters (exact ones towards hosts,
α-approximated ones towards other switches): under TR at k=8 with 100k filters, 80 switches hold
7.6M rules over about 200k distinct filter objects. What the compiler works out per rule from its
filter alone (its comparisons type-checked, the headers it reads, its DNF cubes) is the same in
every switch, and it was most of a switch's compile (about 2 of 3 s for a 95k-rule TR edge switch).

Inside :func:`sharing`, those results are kept per filter *object* (by identity, with the object
held so its id cannot be reused) for one spec *object*: a different spec, or no :func:`sharing`,
computes everything as before. Keying by identity costs no walk of the filter tree, which hashing
or comparing filters would. Errors are never kept: a filter that fails is worked out again (and
fails again) wherever it is used.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, TypeVar

T = TypeVar("T")

_active: "FilterMemo | None" = None


class FilterMemo:
    """``(kind, id(filter), *extra) -> (filter, result)`` for one spec object."""

    def __init__(self, spec: object) -> None:
        self.spec = spec
        self._results: dict[tuple, tuple[object, Any]] = {}
        self._interned: dict[object, int] = {}

    def get(self, kind: str, filter_: object, compute: Callable[[], T], *extra: object) -> T:
        """The ``kind`` result for ``filter_`` (and ``extra``, hashable values it depends on),
        computed the first time (an exception is not kept: it propagates)."""
        key = (kind, id(filter_), *extra)
        found = self._results.get(key)
        if found is None:
            found = self._results[key] = (filter_, compute())
        return found[1]

    def find(self, kind: str, filter_: object, *extra: object) -> Any:
        """What :meth:`put` kept for these, else None."""
        found = self._results.get((kind, id(filter_), *extra))
        return None if found is None else found[1]

    def put(self, kind: str, filter_: object, result: Any, *extra: object) -> None:
        self._results[(kind, id(filter_), *extra)] = (filter_, result)

    def intern(self, value: object) -> int:
        """A small int standing for ``value`` (hashable) in keys: cheaper to hash per filter."""
        return self._interned.setdefault(value, len(self._interned))


@contextlib.contextmanager
def sharing(spec: object) -> Iterator[FilterMemo]:
    """Share per-filter results for compiles against ``spec`` inside the block (nestable: an
    enclosing memo for the same spec is reused)."""
    global _active
    outer = _active
    if outer is not None and outer.spec is spec:
        yield outer
        return
    _active = FilterMemo(spec)
    try:
        yield _active
    finally:
        _active = outer


def memo(spec: object) -> FilterMemo | None:
    """The active memo if it is for ``spec`` (the same object), else None."""
    return _active if _active is not None and _active.spec is spec else None
