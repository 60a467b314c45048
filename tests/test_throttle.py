"""--on-throttle keep|discard|wait and energy per GEMM: the device-independent policies driven by a seeded fake
reading source (a fake probe, fake energy counter and fake sleep; the blocks they guard are real timings of
the CPU backend where a record is made), the NVML readings' decoding, and the refusals where nothing reports."""

from __future__ import annotations

import random

import pytest
from click.testing import CliRunner

from mfu_sweep.cli import main
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.measure.backends.cpu import CpuBackend
from mfu_sweep.measure.backends.cuda_telemetry import field_value, throttle_state
from mfu_sweep.measure.bench import Task, run_task
from mfu_sweep.measure.machine.energy import metered_block_timer
from mfu_sweep.measure.machine.throttle import ThrottleState, guard_block_timer, policy_from_env
from mfu_sweep.measure.task import ON_THROTTLE_ENV
from mfu_sweep.measure.timing import TimingConfig
from mfu_sweep.measure.worker import check_throttle_readings
from mfu_sweep.records.results import Record, finish_record
from mfu_sweep.specs import Peak
from mfu_sweep.util.errors import BackendError

HOT = ThrottleState(True, ("hw_thermal_slowdown",))
COOL = ThrottleState(False)


class FakeProbe:
    """Throttle readings from a seeded source: throttled with probability ``p``, or as scripted."""

    def __init__(self, p: float = 0.0, script: list[bool] | None = None, seed: int = 0) -> None:
        self.rng, self.p, self.script, self.reads = random.Random(seed), p, list(script or []), 0

    def __call__(self) -> ThrottleState:
        self.reads += 1
        hot = self.script.pop(0) if self.script else self.rng.random() < self.p
        return HOT if hot else COOL


class Blocks:
    """A block timer that counts its blocks (each 1 ms per call)."""

    def __init__(self) -> None:
        self.blocks: list[int] = []

    def __call__(self, n: int) -> float:
        self.blocks.append(n)
        return 1e-3 * n


def test_keep_times_every_block_once_and_never_reads_the_probe() -> None:
    blocks, probe, sleeps = Blocks(), FakeProbe(p=1.0), []
    timed, log = guard_block_timer(blocks, probe, "keep", sleep=sleeps.append)
    assert [timed(n) for n in (1, 4, 4)] == [1e-3, 4e-3, 4e-3]
    assert blocks.blocks == [1, 4, 4] and probe.reads == 0 and sleeps == [] and log.discarded == 0


def test_discard_retimes_throttled_blocks_after_the_recovery_delay() -> None:
    blocks, sleeps = Blocks(), []
    probe = FakeProbe(script=[False, True, True, False, False])
    timed, log = guard_block_timer(blocks, probe, "discard", sleep=sleeps.append, recovery_s=0.05)
    timed(1)  # the first call: never discarded (it holds compile and first-use costs), no probe read
    assert probe.reads == 0
    assert timed(8) == 8e-3 and timed(8) == 8e-3 and timed(8) == 8e-3
    # block 2 ran three times: twice throttled, thrown away after a 50 ms rest each, then kept
    assert blocks.blocks == [1, 8, 8, 8, 8, 8] and sleeps == [0.05, 0.05]
    assert log.to_json() == {"policy": "discard", "recovery_s": 0.05, "discarded_blocks": 2, "waits": 0,
                             "waited_s": 0.0, "gave_up": False, "reasons": ["hw_thermal_slowdown"]}


def test_discard_gives_up_on_a_device_that_never_recovers() -> None:
    blocks, sleeps = Blocks(), []
    timed, log = guard_block_timer(blocks, FakeProbe(p=1.0), "discard", sleep=sleeps.append, max_discards=5)
    timed(1)
    assert timed(2) == 2e-3 and log.gave_up and log.discarded == 5 and len(blocks.blocks) == 1 + 6
    timed(2)  # gave up: the rest are kept as they are
    assert log.discarded == 5 and len(sleeps) == 5


def test_wait_rests_until_the_device_is_clear_then_times() -> None:
    blocks, sleeps = Blocks(), []
    probe = FakeProbe(script=[True, True, False, False])
    timed, log = guard_block_timer(blocks, probe, "wait", sleep=sleeps.append, recovery_s=0.05)
    timed(1)
    timed(4)
    timed(4)
    assert blocks.blocks == [1, 4, 4] and sleeps == [0.05, 0.05]
    assert (log.waits, log.waited_s, log.discarded, log.gave_up) == (2, 0.1, 0, False)
    stuck, stuck_sleeps = Blocks(), []
    timed, log = guard_block_timer(stuck, FakeProbe(p=1.0), "wait", sleep=stuck_sleeps.append, max_wait_s=0.2)
    timed(1)
    timed(4)
    timed(4)
    assert log.gave_up and len(stuck_sleeps) == 4 and stuck.blocks == [1, 4, 4]  # waited once, then measured


@pytest.mark.parametrize("seed", range(3))
def test_discard_keeps_only_blocks_the_probe_saw_cool(seed: int) -> None:
    probe, reads_per_block = FakeProbe(p=0.3, seed=seed), []
    timed, log = guard_block_timer(Blocks(), probe, "discard", sleep=lambda s: None)
    timed(1)
    for _ in range(50):
        before = probe.reads
        timed(2)
        reads_per_block.append(probe.reads - before)
    # every read but the last of a block saw the device throttled, and each of those blocks was thrown away
    assert log.discarded == sum(reads_per_block) - len(reads_per_block) > 0


def test_policy_from_env() -> None:
    assert policy_from_env("") == "keep" and policy_from_env("wait") == "wait"
    with pytest.raises(ValueError, match=f"{ON_THROTTLE_ENV}='always'"):
        policy_from_env("always")


# ----- energy --------------------------------------------------------------------------------------------
def test_energy_meter_sums_the_counter_over_the_blocks_after_the_first() -> None:
    counter = [1000.0]

    def block(n: int) -> float:
        counter[0] += 300.0 * n  # 0.3 J per call
        return 1e-3 * n

    timed, log = metered_block_timer(block, lambda: counter[0])
    timed(1)  # the first call's energy is never counted
    timed(10)
    timed(30)
    out = log.to_json(flops=2e9)
    assert out["calls"] == 40 and out["joules"] == pytest.approx(12.0)
    assert out["joules_per_call"] == pytest.approx(0.3) and out["tflop_per_joule"] == pytest.approx(2e9 / 0.3 / 1e12)
    assert out["watts"] == pytest.approx(300.0)
    still, empty = metered_block_timer(block, lambda: 5.0)
    still(1)
    still(10)
    assert empty.to_json(1e9) is None  # a counter that never moved says nothing


# ----- a record, for real on the CPU, with a fake reading source -------------------------------------------
class _ReportingCpu(CpuBackend):
    """The real CPU backend plus a seeded fake throttle probe and a fake energy counter (1 J per read)."""

    def __init__(self, probe: FakeProbe) -> None:
        super().__init__()
        self.probe, self.mj = probe, 0.0

    def throttle_probe(self) -> FakeProbe:
        return self.probe

    def energy_reader(self):  # noqa: ANN201
        def read() -> float:
            self.mj += 1000.0
            return self.mj

        return read


def test_the_record_carries_throttle_and_energy(monkeypatch) -> None:
    monkeypatch.setenv(ON_THROTTLE_ENV, "discard")
    timing = TimingConfig(budget_s=0.02, min_samples=3, max_samples=5, min_block_s=1e-4, warmup_s=0.0)
    backend = _ReportingCpu(FakeProbe(script=[True] + [False] * 1000))
    rec = run_task(backend, Task(shape=Shape(1, 32, 32, 32), dtype="fp32", timing=timing))
    assert rec.status == "ok"
    assert rec.extra["throttle"]["discarded_blocks"] == 1 and rec.extra["throttle"]["policy"] == "discard"
    energy = rec.extra["energy"]
    assert energy["joules"] == backend.mj / 1000 / 2  # two reads of +1 J around each metered block: 1 J each
    assert energy["joules_per_call"] == pytest.approx(energy["joules"] / energy["calls"])
    assert energy["calls"] >= rec.block_size * len(rec.samples_s)  # the samples' calls at least
    finished = finish_record(Record.from_json(rec.to_json()), Peak(None, {}, None, ""))
    assert finished.extra["energy"] == energy  # survives the file


# ----- NVML readings, decoded from the bindings' own structures ---------------------------------------
def test_field_values_are_read_from_the_member_their_type_names() -> None:
    pynvml = pytest.importorskip("pynvml")
    value = pynvml.c_nvmlFieldValue_t()
    value.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
    value.value.uiVal = 612_345  # mW, as NVML_FI_DEV_POWER_INSTANT reports
    assert field_value(pynvml, value) == 612_345.0
    value.valueType = pynvml.NVML_VALUE_TYPE_DOUBLE
    value.value.dVal = 1.5
    assert field_value(pynvml, value) == 1.5


def test_throttle_state_follows_nvbenchs_rule() -> None:
    assert throttle_state(["gpu_idle"], 1980, 1980) == COOL
    assert throttle_state(["sw_power_cap"], 1700, 1980) == COOL  # the power cap alone is the GPU's sustained speed
    assert throttle_state(["hw_thermal_slowdown"], 1980, 1980) == ThrottleState(True, ("hw_thermal_slowdown",))
    assert throttle_state(["gpu_idle"], 345, 1980) == COOL  # an idle GPU clocks down: no throttling
    low = throttle_state([], 1400, 1980)
    assert low.throttled and low.why == ("sm_clock 1400 < 75% of max 1980 MHz",)


# ----- refusals --------------------------------------------------------------------------------------------
def test_on_throttle_on_the_cpu_is_a_one_line_error_before_any_work(tmp_path) -> None:
    out = CliRunner().invoke(main, ["sweep", "--device", "cpu", "--on-throttle", "wait", "--shape", "64x64x64",
                                    "-o", str(tmp_path / "x.json")])
    assert out.exit_code == 2 and not (tmp_path / "x.json").exists()
    assert out.output.strip().splitlines()[-1] == (
        "Error: Invalid value for --on-throttle: 'wait' needs a device that reports throttling: NVML on an NVIDIA "
        "GPU (--device cuda, pip install nvidia-ml-py); cpu reports none")


def test_the_worker_refuses_a_policy_it_cannot_keep(monkeypatch) -> None:
    monkeypatch.setenv(ON_THROTTLE_ENV, "discard")
    with pytest.raises(BackendError, match="--on-throttle discard needs the device's throttle readings"):
        check_throttle_readings(CpuBackend())
    monkeypatch.setenv(ON_THROTTLE_ENV, "keep")
    check_throttle_readings(CpuBackend())
