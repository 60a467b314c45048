"""Shard identity of a result: which sweep files are pieces of one sharded sweep.

A piece of ``--shard I/N`` (a scheduler array) or of ``torchrun --distribute
shard`` carries ``settings.shard = "I/N"``. ``merge`` refuses a set with a piece
missing or given twice, and ``series`` keeps the pieces of one sweep under one
label although they ran on several hosts. Ground code: the launcher
(``mfu_sweep.measure.distributed``) and the analysis both build on it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from mfu_sweep.records.results import ResultError, Sweep

PER_PIECE_SETTINGS = frozenset({"shard", "rank", "local_rank"})


def parse_shard(text: str) -> tuple[int, int]:
    """Parse ``I/N`` with 0 <= I < N (0-based, like ``SLURM_ARRAY_TASK_ID``)."""
    left, sep, right = text.partition("/")
    if not sep or not left.strip().isdigit() or not right.strip().isdigit():
        raise ValueError(f"--shard {text!r} must be I/N with integers, e.g. 0/4")
    index, count = int(left), int(right)
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"--shard {text!r}: need 0 <= I < N")
    return index, count


def shard_plan(sweep: Sweep) -> tuple[int, str] | None:
    """What every piece of one sharded sweep shares; None when ``sweep`` is no consistent shard piece.

    A piece of ``--shard I/N`` or of ``torchrun --distribute shard`` carries
    ``settings.shard = "I/N"``. Pieces of one sweep have the same shard count and
    the same settings apart from the per-piece ones (``shard``, ``rank``,
    ``local_rank``), whatever host ran them.

    Returns
    -------
    tuple or None
        ``(shard count, the shared settings as canonical JSON)``: equal for the
        pieces of one sweep. None for an unsharded sweep and for inconsistent
        metadata (``shard`` not ``I/N``; a torchrun piece whose ``rank``,
        ``world_size`` or ``distribute`` disagrees with its ``shard``).
    """
    settings = sweep.settings
    shard = settings.get("shard")
    if not shard:
        return None
    try:
        index, count = parse_shard(str(shard))
    except ValueError:
        return None  # not a usable piece: it cannot vouch for another host; check_shards names the bad value
    if not _launcher_agrees(settings, index, count):
        return None
    shared = {k: v for k, v in settings.items() if k not in PER_PIECE_SETTINGS}
    return count, json.dumps(shared, sort_keys=True)


def _launcher_agrees(settings: Mapping[str, Any], index: int, count: int) -> bool:
    """A torchrun piece's rank and world size must be its shard index and count."""
    if "world_size" not in settings:
        return True
    return (settings.get("distribute"), settings.get("world_size"), settings.get("rank")) == ("shard", count, index)


def check_shards(sweeps: Sequence[Sweep]) -> None:
    """Refuse sharded pieces with one missing or given twice (per label)."""
    pieces: dict[tuple[str, int], list[int]] = {}
    for sw in sweeps:
        shard = sw.settings.get("shard")
        if not shard or sw.settings.get("distribute"):
            continue
        index, count = parse_shard(str(shard))
        pieces.setdefault((sw.label, count), []).append(index)
    for (label, count), got in sorted(pieces.items()):
        dup = sorted({i for i in got if got.count(i) > 1})
        missing = sorted(set(range(count)) - set(got))
        if dup:
            raise ResultError(f"label {label!r}: shard(s) {', '.join(f'{i}/{count}' for i in dup)} given twice")
        if missing:
            raise ResultError(f"label {label!r}: shard(s) {', '.join(f'{i}/{count}' for i in missing)} missing")

