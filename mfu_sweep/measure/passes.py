"""Passes of a sweep: ``sweep --repeats R`` measures every task R times, once per pass.

Each pass runs the tasks in its own shuffled order, seeded from the sweep's
``--seed`` and the pass number (:func:`order_seed`), so a slow phase of the
machine (a busy neighbour, a clock or thermal swing) lands on random FLOP
counts instead of a band of neighbouring shapes, and the passes together show
how much a shape's median moves from run to run. Torch-free: the parent
process plans, the workers measure.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


def order_seed(seed: int, pass_index: int) -> int:
    """Seed of pass ``pass_index``'s shuffled order: the first 31 bits of sha256("order:<seed>:<pass>")."""
    digest = hashlib.sha256(f"order:{seed}:{pass_index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def order_seeds(seed: int, repeats: int) -> list[int]:
    """The order seed of every pass, as recorded in ``settings.order_seeds``."""
    return [order_seed(seed, p) for p in range(repeats)]


def shuffled(items: Sequence[T], seed: int) -> list[T]:
    """A copy of ``items`` in the order of ``random.Random(seed).shuffle`` (stable across platforms)."""
    out = list(items)
    random.Random(seed).shuffle(out)
    return out


@dataclass(frozen=True)
class Pass(Generic[T]):
    """One pass: its index, its order seed and the items still to run, in order."""

    index: int
    seed: int
    todo: tuple[T, ...]


def plan_passes(items: Sequence[T], repeats: int, seed: int, key: Callable[[T], Hashable],
                done: Collection[tuple[int, Hashable]] = (),
                passes_of: Callable[[T], int | None] | None = None) -> list[Pass[T]]:
    """The passes of a sweep over ``items``, skipping the (pass, key) pairs already ``done``.

    Every pass holds the whole of ``items`` in its own order, so a resumed sweep
    (``done`` read back from its file) runs what is missing of each pass in the
    order the pass would have used. ``passes_of(item)``, when given and not
    None, limits an item to the first that many passes (a shape file's
    ``passes`` column); the order of the others does not change.
    """
    if repeats < 1:
        raise ValueError(f"repeats={repeats!r} must be at least 1")
    passes = []
    for index, pseed in enumerate(order_seeds(seed, repeats)):
        todo = tuple(t for t in shuffled(items, pseed) if (index, key(t)) not in done
                     and (passes_of is None or (passes_of(t) or repeats) > index))
        passes.append(Pass(index=index, seed=pseed, todo=todo))
    return passes


def plan_slots(items: Sequence[T], repeats: int, key: Callable[[T], Hashable],
               passes_of: Callable[[T], int | None] | None = None) -> set[tuple[int, Hashable]]:
    """Every (pass, key) a sweep over ``items`` measures: what :func:`plan_passes` runs when nothing is done."""
    return {(index, key(t)) for t in items
            for index in range(min(repeats, (passes_of(t) if passes_of else None) or repeats))}
