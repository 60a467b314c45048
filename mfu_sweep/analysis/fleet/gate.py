"""The acceptance gate of ``compare --fail-on``: pass or fail a fleet from its leaderboards, in one line.

A device *fails* when it is slower than its reference (the median of the other
devices, or a ``--baseline``) by more than the margin, with confidence: in a
FLOP band or over a run of FLOP counts, the test that flags a device in the
fleet view (:mod:`mfu_sweep.analysis.fleet.view`). ``fail_on="ambiguous"`` is
stricter: a device fails too when some band cannot show it at least as fast
as the reference within the margin (an *ambiguous* band), so a pass means
every device was shown the same or faster everywhere. A difference within
the margin never fails.

Cost is linear in devices; nothing here recomputes a statistic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mfu_sweep.analysis.fleet.leaderboard import REST, Leaderboard, leaderboards
from mfu_sweep.analysis.fleet.view import FleetView, replicate_fleets
from mfu_sweep.analysis.ground.series import Series, SeriesKey, with_peak
from mfu_sweep.analysis.verdicts.margin import VerdictSettings, margin_words

FAIL_ON = ("slower", "ambiguous")
MOST_NAMED = 5


class GateError(ValueError):
    """Nothing to gate on, or an unknown ``fail_on``; the message says why."""


@dataclass(frozen=True)
class Failure:
    """One device that fails the gate: its board (dtype, mode, reference), mean ratio and why."""

    label: str
    dtype: str
    mode: str
    reference: str
    mean_ratio: float
    reason: str  # "slower" or "ambiguous" (by MFU too: the JSON's key; the text says "lower MFU")
    metric: str = "tflops"

    def text(self) -> str:
        ref = "the rest" if self.reference == REST else self.reference
        reason = "lower MFU" if self.reason == "slower" and self.metric == "mfu" else self.reason
        return f"{self.label} ({self.dtype} {self.mode}, x{self.mean_ratio:.3f} of {ref}, {reason})"

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Gate:
    """The outcome: ``failures`` (empty when it passes; one per device, dtype and mode) among ``checked`` devices
    (distinct labels: a GPU measured in two dtypes is one device) of ``boards``; ``metric`` is the boards' metric
    ("mixed" when they differ), which names what behind means."""

    fail_on: str
    margin: float
    checked: int
    boards: int
    failures: tuple[Failure, ...]
    metric: str = "tflops"

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def failed_devices(self) -> int:
        """Distinct devices that fail, in any dtype or mode."""
        return len({f.label for f in self.failures})

    def line(self) -> str:
        """One line for a log, e.g. "gate (--fail-on slower, margin 2%): FAIL: 1 of 8 devices ...: h100.r3 (...)"."""
        behind = {"tflops": "slower", "mfu": "lower in MFU"}.get(self.metric, "behind")
        what = (f"{behind} than their reference by more than {margin_words(self.margin)}" if self.fail_on == "slower"
                else f"{behind} by more than {margin_words(self.margin)}, or not shown within it (ambiguous)")
        head = f"gate (--fail-on {self.fail_on}, margin {margin_words(self.margin)}): "
        if self.passed:
            return head + f"pass: 0 of {self.checked} devices {what}"
        named = "; ".join(f.text() for f in self.failures[:MOST_NAMED])
        more = f"; and {len(self.failures) - MOST_NAMED} more" if len(self.failures) > MOST_NAMED else ""
        return head + f"FAIL: {self.failed_devices} of {self.checked} devices {what}: {named}{more}"

    def to_json(self) -> dict[str, Any]:
        return {"fail_on": self.fail_on, "margin": self.margin, "metric": self.metric, "passed": self.passed,
                "checked": self.checked, "failed_devices": self.failed_devices, "boards": self.boards,
                "failures": [f.to_json() for f in self.failures], "line": self.line()}


def device_failure(board: Leaderboard, label: str, fail_on: str) -> str | None:
    """``"slower"``, ``"ambiguous"`` or None for one device of ``board`` under ``fail_on``."""
    cells = board.cells_of.get(label, ())
    if any(c.verdict < 0 for c in cells) or any(r.direction < 0 for r in board.runs_of.get(label, ())):
        return "slower"
    if fail_on == "ambiguous" and any(c.call == "ambiguous" for c in cells):
        return "ambiguous"
    return None


def _unique(boards: Sequence[Leaderboard]) -> list[Leaderboard]:
    out: list[Leaderboard] = []
    for b in boards:
        if not any(b is o for o in out):
            out.append(b)
    return out


def gate(fleets: Sequence[FleetView], boards: Sequence[Leaderboard], fail_on: str = "slower") -> Gate:
    """Gate the devices of ``fleets`` (their boards) and ``boards`` (against the rest or a baseline).

    Raises :class:`GateError` when there is no board at all (a pair has no reference to fail against).
    """
    if fail_on not in FAIL_ON:
        raise GateError(f"fail_on={fail_on!r} must be one of {', '.join(FAIL_ON)}")
    every = _unique([f.board for f in fleets] + list(boards))
    if not every:
        raise GateError("--fail-on needs devices to rank: a replicate run (labels <label>.r<rank>), --baseline "
                        "LABEL, or more than 4 devices of one dtype and mode")
    failures: dict[tuple[str, str, str], Failure] = {}
    for board in every:
        for label in board.devices:
            reason = device_failure(board, label, fail_on)
            key = (label, board.dtype, board.mode)
            if reason and (key not in failures or failures[key].reason != "slower"):
                failures[key] = Failure(label, board.dtype, board.mode, board.reference,
                                        board.overall.get(label, float("nan")), reason, board.metric)
    checked = len({lbl for b in every for lbl in b.devices})
    ordered = sorted(failures.values(), key=lambda f: (f.reason != "slower", f.mean_ratio, f.label))
    metrics = {b.metric for b in every}
    return Gate(fail_on, max(b.margin for b in every), checked, len(every), tuple(ordered),
                metrics.pop() if len(metrics) == 1 else "mixed")


def fleets_and_boards(series: Mapping[SeriesKey, Series], metric: str, baseline: str | None = None,
                      boards_too: bool = True, skipped: list[str] | None = None,
                      settings: VerdictSettings = VerdictSettings()
                      ) -> tuple[list[FleetView], list[Leaderboard], list[str]]:
    """Fleet views of the replicate runs in ``series``, and (when ``boards_too``) the leaderboards against the rest
    or ``baseline``, with their notes: what :func:`gate` judges (``compare --fail-on`` and ``mfu_sweep.api.gate``).

    With ``skipped`` (a list), MFU leaderboards leave out series without a peak and append a note each (the
    baseline is kept, so that its lack of a peak stays an error). ``settings`` (``alpha``, ``min_run``,
    ``margin``) rank both, :func:`~mfu_sweep.analysis.fleet.leaderboard.leaderboards` and
    :func:`~mfu_sweep.analysis.fleet.view.replicate_fleets`.
    """
    from mfu_sweep.util.allocator import paused_gc

    boards: list[Leaderboard] = []
    notes: list[str] = []
    with paused_gc():  # many devices: millions of small objects that the collector would walk again and again
        if boards_too:
            ranked = series
            if skipped is not None:
                ranked, left_out = with_peak(series, metric, keep=baseline)
                skipped += left_out
            boards, notes = leaderboards(ranked, metric, settings, reference=baseline or REST)
        return replicate_fleets(series, "tflops", settings, boards=boards), boards, notes
