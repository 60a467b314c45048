"""Scale-out on existing launchers: torchrun ranks and scheduler shards.

* ``--shard I/N`` (no launcher needed, e.g. a Slurm job array): run every
  N-th task starting at I; ``merge`` puts the pieces together and refuses a
  set with a piece missing or given twice.
* Under ``torchrun`` (``WORLD_SIZE`` set), each rank uses its local device
  (``LOCAL_RANK``) and ``--distribute`` picks ``replicate`` (every device runs
  every shape, labels get ``.r<rank>`` so the spread across devices of one
  chip shows up in compare/report) or ``shard`` (tasks split across ranks).
  Each rank checkpoints its own file; at the end the sweeps are gathered to
  rank 0 over ``torch.distributed`` (gloo, which works everywhere) and
  written as one merged file, each record tagged with rank, host and device
  index.
* The pieces of one sharded sweep (either way) may come from several hosts:
  :func:`shard_plan` says what they share, and ``series.check_labels`` accepts
  them under one label although ``run.host`` differs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from mfu_sweep.results import ResultError, Sweep, write_json_atomic

T = TypeVar("T")
DISTRIBUTE = ("replicate", "shard")
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


@dataclass(frozen=True)
class Placement:
    """Where this process sits: its rank among launcher processes and its shard of the tasks."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    launcher: bool = False
    distribute: str = "replicate"
    shard_index: int = 0
    shard_count: int = 1
    job_id: str | None = None

    def select(self, tasks: Sequence[T]) -> list[T]:
        """This process's tasks, in order."""
        return list(tasks[self.shard_index :: self.shard_count])

    def device(self, device: str) -> str:
        """Under a launcher, an accelerator without an explicit index uses ``LOCAL_RANK``."""
        if not self.launcher or ":" in device or device == "cpu":
            return device
        return f"{device}:{self.local_rank}"

    @property
    def label_suffix(self) -> str:
        return f".r{self.rank}" if self.launcher and self.distribute == "replicate" and self.world > 1 else ""

    def output(self, path: Path) -> Path:
        """Per-process checkpoint file; under a launcher rank 0 later writes ``path`` merged."""
        if self.launcher and self.world > 1:
            return path.with_name(f"{path.stem}.rank{self.rank}{path.suffix}")
        if self.shard_count > 1:
            return path.with_name(f"{path.stem}.shard{self.shard_index}-of-{self.shard_count}{path.suffix}")
        return path

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.shard_count > 1:
            out["shard"] = f"{self.shard_index}/{self.shard_count}"
            if self.job_id:
                out["job_id"] = self.job_id
        if self.launcher:
            out.update(rank=self.rank, world_size=self.world, local_rank=self.local_rank, distribute=self.distribute)
        return out


# The id every piece of one sharded job shares, by launcher: a Slurm job array, a torchrun rendezvous.
JOB_ID_ENV = ("SLURM_ARRAY_JOB_ID", "TORCHELASTIC_RUN_ID")


def job_id(env: Mapping[str, str]) -> str | None:
    """``SLURM_ARRAY_JOB_ID=123`` -> ``"SLURM_ARRAY_JOB_ID=123"``; None outside such a job.

    Recorded with a shard so that pieces of two different jobs with the same
    settings are never taken for one sweep (see :func:`shard_plan`).
    """
    for name in JOB_ID_ENV:
        if env.get(name):
            return f"{name}={env[name]}"
    return None


def placement(distribute: str | None, shard: str | None, env: Mapping[str, str] | None = None) -> Placement:
    """Work out this process's placement from the options and the launcher's environment."""
    env = os.environ if env is None else env
    launcher = "WORLD_SIZE" in env and "RANK" in env
    if distribute is not None and distribute not in DISTRIBUTE:
        raise ValueError(f"--distribute {distribute!r} must be one of {', '.join(DISTRIBUTE)}")
    if launcher:
        if shard:
            raise ValueError("--shard is for runs without torchrun; under torchrun use --distribute shard")
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
        mode = distribute or "replicate"
        index, count = (rank, world) if mode == "shard" else (0, 1)
        return Placement(rank, world, int(env.get("LOCAL_RANK", 0)), True, mode, index, count, job_id(env))
    if distribute:
        raise ValueError("--distribute needs torchrun (WORLD_SIZE/RANK unset); without it use --shard I/N")
    index, count = parse_shard(shard) if shard else (0, 1)
    return Placement(shard_index=index, shard_count=count, job_id=job_id(env))


def tag_records(doc: dict[str, Any], rank: int) -> dict[str, Any]:
    """Tag each record of a sweep document with the rank, host and device index that measured it."""
    host, index = doc["run"].get("host"), doc["device"].get("index")
    doc["records"] = [{**r, "rank": rank, "host": host, "device_index": index} for r in doc["records"]]
    return doc


def gather_to_rank0(sweep: Sweep, place: Placement, final: Path) -> Path | None:
    """Gather every rank's sweep on rank 0 and write them as one merged file (rank 0 returns its path)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group(backend="gloo", timeout=timedelta(hours=24))
    docs: list[Any] | None = [None] * place.world if place.rank == 0 else None
    dist.gather_object(tag_records(sweep.to_json(), place.rank), docs, dst=0)
    dist.destroy_process_group()
    if place.rank != 0:
        return None
    from mfu_sweep.merge import merge_sweeps
    from mfu_sweep.results import parse_document

    sweeps = [s for i, d in enumerate(docs or []) for s in parse_document(d, source=f"rank {i}")]
    write_json_atomic(final, merge_sweeps(sweeps).to_json())
    return final


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

