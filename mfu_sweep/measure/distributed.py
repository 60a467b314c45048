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
  :func:`mfu_sweep.records.shards.shard_plan` says what they share, and ``series.check_labels`` accepts
  them under one label although ``run.host`` differs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from mfu_sweep.records.results import Sweep
from mfu_sweep.records.shards import parse_shard

T = TypeVar("T")
DISTRIBUTE = ("replicate", "shard")


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


def gather_to_rank0(sweep: Sweep, place: Placement) -> list[dict[str, Any]] | None:
    """Gather every rank's sweep document on rank 0 (rank 0 gets them in rank order, the others None).

    Each record is tagged with rank, host and device index. Merging them is the
    caller's job (``mfu_sweep.analysis.sources.merge``): measurement never imports analysis.
    """
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group(backend="gloo", timeout=timedelta(hours=24))
    docs: list[Any] | None = [None] * place.world if place.rank == 0 else None
    dist.gather_object(tag_records(sweep.to_json(), place.rank), docs, dst=0)
    dist.destroy_process_group()
    if place.rank != 0:
        return None
    return list(docs or [])
