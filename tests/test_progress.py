"""Progress on stderr: a bar on a terminal, a few plain lines in a log (never ``\\r`` frames in a file)."""

from __future__ import annotations

import io
import itertools

from mfu_sweep.util.progress import MAX_LINE, Progress


class FakeClock:
    """Seconds that advance only when told (seeded, deterministic)."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_log_gets_a_line_every_few_seconds_and_one_at_the_close() -> None:
    clock, out = FakeClock(), io.StringIO()
    with Progress("pass 1/2", total=30, unit="shape", stream=out, every_s=10, close_line=True, clock=clock) as bar:
        for i in range(30):
            bar.describe(f"{64 + i}x64x64 fp32 eager")
            clock.t += 1.0
            bar.advance(note=f"MFU {i}%")
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert lines == ["pass 1/2: 10/30 shapes, last 73x64x64 fp32 eager, MFU 9%, 10 s, 1 shapes/s, ETA 20 s",
                     "pass 1/2: 20/30 shapes, last 83x64x64 fp32 eager, MFU 19%, 20 s, 1 shapes/s, ETA 10 s",
                     "pass 1/2: 30/30 shapes, last 93x64x64 fp32 eager, MFU 29%, 30 s, 1 shapes/s",
                     "pass 1/2: 30/30 shapes, MFU 29%, 30 s in all, 1 shapes/s"]


def test_a_short_step_prints_nothing_in_a_log_unless_asked() -> None:
    clock, out = FakeClock(), io.StringIO()
    with Progress("fitting", total=3, unit="series", units="series", stream=out, every_s=5, clock=clock) as bar:
        for _ in range(3):
            bar.advance()
    assert out.getvalue() == ""
    with Progress("fitting", total=None, unit="series", units="series", stream=out, every_s=5, clock=clock) as bar:
        for _ in range(3):
            clock.t += 4
            bar.advance()
    assert out.getvalue().splitlines() == ["fitting: 2 series, 8 s, 4 s per series",
                                           "fitting: 3 series, 12 s in all, 4 s per series"]


def test_quiet_writes_nothing_and_lines_stay_short() -> None:
    clock, out = FakeClock(), io.StringIO()
    with Progress("x", total=1, stream=out, quiet=True, close_line=True, clock=clock) as bar:
        bar.advance(note="y")
    assert out.getvalue() == ""
    with Progress("pass 1/1", total=1, stream=out, close_line=True, clock=clock) as bar:
        bar.advance(note="z" * 1000)
    (line,) = out.getvalue().splitlines()
    assert len(line) == MAX_LINE and line.endswith("...")


def test_a_stream_that_is_not_a_terminal_gets_lines_a_terminal_gets_the_bar() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, frames in ((io.StringIO(), False), (Tty(), True)):
        ticks = itertools.count(step=20.0)
        with Progress("pass 1/1", total=2, unit="shape", stream=stream, close_line=True,
                      clock=ticks.__next__) as bar:
            bar.describe("64x64x64")
            bar.advance(note="MFU 1%")
            bar.advance(note="MFU 2%")
        assert ("\r" in stream.getvalue()) is frames, stream.getvalue()


def test_the_eta_counts_the_work_after_this_step_at_this_steps_rate() -> None:
    """A sweep's pass 1 of 3: 40 shapes in this pass, 80 in the two passes after it."""
    clock, out = FakeClock(), io.StringIO()
    with Progress("pass 1/3", total=40, unit="shape", stream=out, every_s=20, clock=clock, after=80) as bar:
        for _ in range(10):
            clock.t += 2.0
            bar.advance()
        assert bar.rate_text() == "2 s per shape"
        assert bar.eta_text() == "ETA 3.7 min"  # (30 + 80) shapes x 2 s
    assert out.getvalue().splitlines() == ["pass 1/3: 10/40 shapes, 20 s, 2 s per shape, ETA 3.7 min",
                                           "pass 1/3: 10/40 shapes, 20 s in all, 2 s per shape, ETA 3.7 min"]
    idle = Progress("x", total=5, stream=io.StringIO(), clock=clock)
    assert idle.rate_text() == idle.eta_text() == ""  # nothing done yet: no rate, no guess
