"""What a sweep does about clock throttling while a shape is timed: ``sweep --on-throttle keep|discard|wait``.

Device-independent: the policy sees a block timer and a *probe*, a callable that says whether the
device is throttling now (on NVIDIA: an NVML throttle reason that lowers the clock, or the SM clock
below 75% of its maximum, nvbench's rule; :mod:`mfu_sweep.measure.backends.cuda_telemetry`).

``keep``
    Time as usual; a shape that throttled is flagged ``throttled`` (the default, as before).
``discard``
    nvbench's behaviour: after every timed block the probe is read; a block timed while the device
    throttled is thrown away, the device is left idle for a recovery delay (``RECOVERY_S``, nvbench's
    50 ms), and the block is timed again, up to ``MAX_DISCARDS`` times per shape (then the block is
    kept and the record says the guard gave up).
``wait``
    Before every timed block, wait (in recovery delays, up to ``MAX_WAIT_S`` per block) until the
    probe says the device is not throttling, then time it.

The first call is never discarded or delayed: it holds the compile and first-use costs. What the
guard did goes into the record's ``throttle`` block (:meth:`ThrottleLog.to_json`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mfu_sweep.measure.task import ON_THROTTLE_ENV
from mfu_sweep.measure.timing import BlockTimer

POLICIES = ("keep", "discard", "wait")
RECOVERY_S = 0.05
MAX_DISCARDS = 50
MAX_WAIT_S = 10.0


@dataclass(frozen=True)
class ThrottleState:
    """One reading of the probe: throttling now, and why (the reasons' names, or the low clock)."""

    throttled: bool
    why: tuple[str, ...] = ()


Probe = Callable[[], ThrottleState]


@dataclass
class ThrottleLog:
    """What the guard did for one shape."""

    policy: str
    recovery_s: float
    discarded: int = 0
    waits: int = 0
    waited_s: float = 0.0
    gave_up: bool = False
    reasons: set[str] = field(default_factory=set)

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.policy, "recovery_s": self.recovery_s, "discarded_blocks": self.discarded,
                "waits": self.waits, "waited_s": round(self.waited_s, 6), "gave_up": self.gave_up,
                "reasons": sorted(self.reasons)}


def policy_from_env(raw: str | None = None) -> str:
    """The ``--on-throttle`` policy a sweep handed its worker (``keep`` when unset); ValueError naming a bad one."""
    value = (os.environ.get(ON_THROTTLE_ENV) if raw is None else raw) or "keep"
    if value not in POLICIES:
        raise ValueError(f"{ON_THROTTLE_ENV}={value!r} is not one of {', '.join(POLICIES)}")
    return value


def guard_block_timer(time_block: BlockTimer, probe: Probe, policy: str, sleep: Callable[[float], Any] = time.sleep,
                      recovery_s: float = RECOVERY_S, max_discards: int = MAX_DISCARDS,
                      max_wait_s: float = MAX_WAIT_S) -> tuple[BlockTimer, ThrottleLog]:
    """``time_block`` under ``policy`` (see the module docstring), and the log it fills in."""
    if policy not in POLICIES:
        raise ValueError(f"policy={policy!r} is not one of {', '.join(POLICIES)}")
    log = ThrottleLog(policy, recovery_s)
    first = [True]

    def wait_until_clear() -> None:
        if log.gave_up:  # the device stayed throttled for max_wait_s once: measure the rest as it is
            return
        waited = 0.0
        state = probe()
        while state.throttled:
            if waited >= max_wait_s:
                log.gave_up = True
                break
            log.reasons.update(state.why)
            sleep(recovery_s)
            waited += recovery_s
            log.waits += 1
            state = probe()
        log.waited_s += waited

    def guarded(n: int) -> float:
        if first[0] or policy == "keep":
            first[0] = False
            return time_block(n)
        if policy == "wait":
            wait_until_clear()
            return time_block(n)
        while True:
            elapsed = time_block(n)
            state = probe()
            if not state.throttled:
                return elapsed
            log.reasons.update(state.why)
            if log.discarded >= max_discards:
                log.gave_up = True
                return elapsed
            log.discarded += 1
            sleep(recovery_s)

    return guarded, log
