"""Energy per GEMM from a cumulative energy counter read around every timed block.

Device-independent: the meter wraps a block timer and a reader of a counter in millijoules that
only grows (on NVIDIA: ``nvmlDeviceGetTotalEnergyConsumption``, Volta and newer). It sums the
counter's increase and the calls over every block after the first call (block sizing, warm-up and
samples), so the energy of one GEMM is ``joules / calls``: the device's whole draw while it runs
back-to-back GEMMs of one shape, idle power included. The counter's resolution (its update period)
blurs a single block, not the sum over many.

A block timer may run more calls than it was asked for and return the time scaled to the ``n`` asked (the
CUDA graph timer replays whole graphs: ``ceil(n / L) * L`` calls). Such a timer says how many calls its last
block really ran in its attribute ``last_calls`` (:data:`RAN_ATTR`); the meter counts those, and the seconds
they took, so the energy of one GEMM is not inflated by the calls the time was scaled down from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mfu_sweep.measure.timing import BlockTimer

EnergyReader = Callable[[], float]
"""Returns the device's cumulative energy counter in millijoules."""

RAN_ATTR = "last_calls"
"""The attribute of a block timer holding the calls its last block really ran (absent: the ``n`` asked)."""


def calls_ran(time_block: BlockTimer, asked: int) -> int:
    """The calls ``time_block``'s last block really ran: its :data:`RAN_ATTR` where it has one, else ``asked``."""
    ran = getattr(time_block, RAN_ATTR, None)
    return int(ran) if ran else asked


@dataclass
class EnergyLog:
    """Energy, calls and seconds summed over the metered blocks of one shape."""

    millijoules: float = 0.0
    calls: int = 0
    seconds: float = 0.0

    def to_json(self, flops: float) -> dict[str, Any] | None:
        """``joules_per_call``, ``tflop_per_joule`` and ``watts`` of the metered blocks (None without energy)."""
        if self.calls == 0 or self.millijoules <= 0:
            return None
        per_call = self.millijoules / 1e3 / self.calls
        return {"joules": self.millijoules / 1e3, "calls": self.calls, "seconds": self.seconds,
                "joules_per_call": per_call, "tflop_per_joule": flops / per_call / 1e12,
                "watts": self.millijoules / 1e3 / self.seconds if self.seconds > 0 else None,
                "source": "cumulative energy counter around each timed block (first call excluded)"}


def metered_block_timer(time_block: BlockTimer, read_mj: EnergyReader) -> tuple[BlockTimer, EnergyLog]:
    """``time_block`` with the energy counter read before and after every block but the first."""
    log = EnergyLog()
    first = [True]

    def metered(n: int) -> float:
        if first[0]:
            first[0] = False
            return time_block(n)
        before = read_mj()
        elapsed = time_block(n)
        log.millijoules += read_mj() - before
        ran = calls_ran(time_block, n)
        log.calls += ran
        log.seconds += elapsed * ran / n  # the timer scaled its time to the n calls asked
        return elapsed

    return metered, log
