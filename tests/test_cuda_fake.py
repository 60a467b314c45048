"""CudaBackend, its sampler, throttle policies, energy, the profiler timer's parsing and the GPU-neighbours check,
driven end to end on the CPU by a fake ``torch.cuda`` and a fake NVML (tests/cuda_fakes.py).

They test logic, never numbers: the fake device's times and energies are made up (a fixed time and energy per
kernel), so only what the code does with them is checked. A test named ``test_defect_N_...`` catches defect N of
issue 46; each of those fails on the code before the fix (see the issue note).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from typing import Any

import pynvml  # nvidia-ml-py, in the test extra: its real constants and structures
import pytest
import torch
from cuda_fakes import FakeGpu, NvmlState, fake_cuda, fake_nvml
from torch.utils._python_dispatch import TorchDispatchMode

from mfu_sweep.gemm.dtypes import get_dtype
from mfu_sweep.gemm.shapes import parse_shape
from mfu_sweep.measure.backends import cuda as cuda_mod
from mfu_sweep.measure.backends import operands
from mfu_sweep.measure.backends.cuda import CudaBackend, graph_block_timer, rocm_scale_layout, unsupported_reason
from mfu_sweep.measure.backends.profiler_timer import kernel_seconds, op_seconds
from mfu_sweep.measure.bench import run_task
from mfu_sweep.measure.checks import selftest
from mfu_sweep.measure.layouts import grouped_problem
from mfu_sweep.measure.machine.energy import metered_block_timer
from mfu_sweep.measure.machine.gpu_neighbours import GpuNeighbours
from mfu_sweep.measure.task import FAST_ACCUM_ENV, ON_THROTTLE_ENV, TIMER_ENV, Task
from mfu_sweep.measure.timing import TimingConfig
from mfu_sweep.specs import load_chips

QUICK = TimingConfig(budget_s=0.05, min_samples=3, max_samples=5, min_block_s=1e-3, warmup_s=0.0)
IDLE = pynvml.nvmlClocksEventReasonGpuIdle
POWER_CAP = pynvml.nvmlClocksEventReasonSwPowerCap


class FakeCudaBackend(CudaBackend):
    """CudaBackend on the fake device: its tensors live on the CPU, everything else goes through torch.cuda."""

    def __init__(self, index: int = 0, timer: str | None = None) -> None:
        super().__init__(index, timer)
        self.device = torch.device("cpu")


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGpu]:
    """A fake H100 behind torch.cuda, counting every GEMM as a kernel; NVML absent unless a test installs it."""
    device = FakeGpu()
    for name, value in fake_cuda(device).items():
        monkeypatch.setattr(torch.cuda, name, value, raising=False)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` fails: no NVML until nvml() installs one
    for env in (TIMER_ENV, ON_THROTTLE_ENV, FAST_ACCUM_ENV):
        monkeypatch.delenv(env, raising=False)
    with device:
        yield device


def nvml(monkeypatch: pytest.MonkeyPatch, state: NvmlState) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(state))


def task(shape: str, dtype: str = "bf16") -> Task:
    return Task(shape=parse_shape(shape), dtype=dtype, timing=QUICK)


# ----- the harness itself -----------------------------------------------------------------------------
def test_fake_backend_describes_the_fake_gpu_and_times_with_its_events(gpu: FakeGpu) -> None:
    backend = FakeCudaBackend(timer="events")
    info = backend.describe()
    assert info.name == "NVIDIA H100 80GB HBM3" and info.chip == "h100-sxm"
    assert info.details["compute_capability"] == "9.0" and info.details["telemetry"].startswith("none")
    rec = run_task(backend, task("64x64x64"))
    assert rec.status == "ok" and rec.timer == "cuda-events"
    assert all(s == pytest.approx(gpu.kernel_s) for s in rec.samples_s)  # one fake kernel per call, exactly


def test_a_shape_past_the_free_gpu_memory_is_recorded_oom_and_never_launched(gpu: FakeGpu) -> None:
    """The memory check before allocation (measure/machine/memory.py) on the CUDA path: torch.cuda.mem_get_info's free
    bytes against the shape's working set; no operand is drawn and no kernel runs."""
    gpu.free_bytes = 2**30
    rec = run_task(FakeCudaBackend(timer="events"), task("32768x32768x32768"))
    assert rec.status == "oom" and gpu.kernels == 0
    assert "mem_get_info" in (rec.error or "") or "mem_get_info" in str(rec.to_json())


def test_graph_timer_replays_whole_graphs_and_scales_to_the_calls_asked(gpu: FakeGpu) -> None:
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    timer = graph_block_timer(lambda: torch.mm(a, b), torch.device("cpu"), 16)
    assert timer(5) == pytest.approx(5 * gpu.kernel_s) and timer.last_calls == 5  # eager, then captured
    assert timer(20) == pytest.approx(20 * gpu.kernel_s) and timer.last_calls == 32  # two replays of 16
    assert timer.graph.replays == 2 and timer.graph.kernels == 16


def test_auto_timer_takes_a_graph_for_small_eager_gemms(gpu: FakeGpu) -> None:
    rec = run_task(FakeCudaBackend(), task("64x64x64"))
    assert rec.status == "ok" and rec.timer.startswith("cuda-graph[")


# ----- defect 1: selftest's fp8 numerics ---------------------------------------------------------------
def test_defect_1_selftest_checks_fp8_in_nt_instead_of_skipping(gpu: FakeGpu) -> None:
    gpu.kernel_s = 0.05  # one call fills a block: the CPU's fp8 GEMMs are slow
    backend = FakeCudaBackend(timer="events")
    for dtype in ("fp8", "fp8-rowwise"):
        check = selftest.check_numerics(backend, dtype)
        assert check.status == "pass", check
        assert check.name.endswith(":nt")
    assert {"fp8", "fp8-rowwise"} <= set(selftest.default_dtypes(backend))


# ----- defect 2: the throttle flag and the idle first sample ---------------------------------------------
def test_defect_2_idle_first_sample_does_not_flag_the_shape_throttled(gpu: FakeGpu,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # the sampler's first read comes before the first GEMM: the GPU idles at 345 MHz; then it runs at 1980 MHz
    nvml(monkeypatch, NvmlState(clock=lambda i: 345 if i == 0 else 1980, reasons=lambda i: IDLE if i == 0 else 0))
    rec = run_task(FakeCudaBackend(timer="events"), task("64x64x64"))
    tel = rec.extra["telemetry"]
    assert tel["sm_clock_mhz"]["min"] == 345.0 and tel["busy_sm_clock_mhz"] == 1980.0
    assert "throttled" not in rec.flags and "throttled_because" not in tel


def test_defect_2_a_low_clock_while_busy_is_still_flagged(gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch) -> None:
    nvml(monkeypatch, NvmlState(clock=lambda i: 345 if i == 0 else 1200, reasons=lambda i: IDLE if i == 0 else 0))
    rec = run_task(FakeCudaBackend(timer="events"), task("64x64x64"))
    assert "throttled" in rec.flags and "sm_clock 1200" in rec.extra["telemetry"]["throttled_because"][0]


# ----- defect 3: the power cap is no throttling ----------------------------------------------------------------
def test_defect_3_discard_keeps_blocks_of_a_power_capped_gpu(gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch) -> None:
    # power-limited on random data: the cap bit is set throughout, the clock stays at 89% of its maximum
    nvml(monkeypatch, NvmlState(clock=lambda i: 1755, reasons=lambda i: POWER_CAP))
    monkeypatch.setenv(ON_THROTTLE_ENV, "discard")
    rec = run_task(FakeCudaBackend(timer="events"), task("64x64x64"))
    assert rec.status == "ok"
    assert rec.extra["throttle"]["discarded_blocks"] == 0 and not rec.extra["throttle"]["gave_up"]
    assert "throttled" not in rec.flags and rec.extra["telemetry"]["power_capped"] is True


def test_defect_3_wait_does_not_wait_for_an_idle_gpu_to_clock_up(gpu: FakeGpu,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # wait probes before each block, when the GPU has nothing to run: NVML says idle, the clock is low
    nvml(monkeypatch, NvmlState(clock=lambda i: 345, reasons=lambda i: IDLE | POWER_CAP))
    monkeypatch.setenv(ON_THROTTLE_ENV, "wait")
    rec = run_task(FakeCudaBackend(timer="events"), task("64x64x64"))
    assert rec.extra["throttle"]["waits"] == 0 and not rec.extra["throttle"]["gave_up"]


def test_discard_still_discards_a_thermal_slowdown(gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch) -> None:
    thermal = pynvml.nvmlClocksEventReasonHwThermalSlowdown
    # the sampler thread reads the reasons too, so which reads the probe gets is not fixed: the first 6 are hot
    nvml(monkeypatch, NvmlState(reasons=lambda i: thermal if i < 6 else 0))
    monkeypatch.setenv(ON_THROTTLE_ENV, "discard")
    rec = run_task(FakeCudaBackend(timer="events"), task("64x64x64"))
    guard = rec.extra["throttle"]
    assert 1 <= guard["discarded_blocks"] <= 6 and not guard["gave_up"] and guard["reasons"] == ["hw_thermal_slowdown"]


# ----- defect 4: energy per GEMM under the graph timer --------------------------------------------------------
def test_defect_4_energy_counts_the_calls_the_graph_really_ran(gpu: FakeGpu) -> None:
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    metered, log = metered_block_timer(graph_block_timer(lambda: torch.mm(a, b), torch.device("cpu"), 16),
                                       lambda: gpu.energy_mj)
    metered(1)  # the first block: eager, not metered
    for n in (5, 20, 33):
        metered(n)
    assert log.calls == 16 + 32 + 48  # whole graphs: ceil(n / 16) * 16
    energy = log.to_json(flops=1.0)
    assert energy["joules_per_call"] == pytest.approx(gpu.mj_per_kernel / 1e3)
    assert energy["watts"] == pytest.approx(gpu.mj_per_kernel / 1e3 / gpu.kernel_s)


def test_defect_4_a_sweep_record_has_the_true_energy_per_gemm(gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch) -> None:
    nvml(monkeypatch, NvmlState(gpu=gpu))
    rec = run_task(FakeCudaBackend(timer="graph"), task("64x64x64"))
    assert rec.status == "ok" and rec.timer.startswith("cuda-graph[")
    assert rec.extra["energy"]["joules_per_call"] == pytest.approx(gpu.mj_per_kernel / 1e3)


# ----- defect 5: fp8-rowwise on sm_89 ----------------------------------------------------------------------------
def test_defect_5_fp8_rowwise_runs_on_sm89(gpu: FakeGpu) -> None:
    assert unsupported_reason("fp8-rowwise", (8, 9), False, "sm_89") is None
    assert "8.9" in (unsupported_reason("fp8-rowwise", (8, 6), False, "sm_86") or "")
    gpu.name, gpu.capability = "NVIDIA L40S", (8, 9)
    rec = run_task(FakeCudaBackend(timer="events"), task("64x64x64:nt", "fp8-rowwise"))
    assert rec.status == "ok", rec.error


# ----- defect 6: _grouped_mm's device-side asserts --------------------------------------------------------------
@pytest.mark.parametrize("bad", ["64x32x64:nn:k=0,64", "64x32x64:nn:k=12,52", "64x32x64:tn:m=12,52"])
def test_defect_6_grouped_shapes_the_kernel_would_assert_on_are_refused_before_launch(gpu: FakeGpu,
                                                                                      bad: str) -> None:
    backend = FakeCudaBackend(timer="events")
    refused = run_task(backend, task(bad))
    assert refused.status == "unsupported" and "torch._grouped_mm (CUTLASS)" in refused.error
    assert gpu.poisoned is None  # nothing reached the device
    after = run_task(backend, task("64x64x64"))  # the worker's next shape still runs
    assert after.status == "ok", after.error


def test_defect_6_grouped_shapes_the_kernel_takes_run(gpu: FakeGpu) -> None:
    backend = FakeCudaBackend(timer="events")
    for fine in ("64x32x64:tn:k=0,64", "64x32x64:nn:k=16,48", "64x32x64:nn:m=12,52", "64x32x64:tn:m=16,48"):
        rec = run_task(backend, task(fine))
        assert rec.status == "ok", (fine, rec.error)


def test_grouped_rule_follows_the_kernel_only_on_its_cutlass_path() -> None:
    assert cuda_mod.grouped_fast_path((9, 0), False, "bf16") and cuda_mod.grouped_fast_path((10, 0), False, "bf16")
    assert not cuda_mod.grouped_fast_path((8, 0), False, "bf16")
    assert not cuda_mod.grouped_fast_path((9, 0), False, "fp16")
    assert grouped_problem(parse_shape("64x32x64:nn:m=12,52"), 2) is None  # A row-major: m boundaries need nothing
    assert grouped_problem(parse_shape("64x32x64:nn:k=6,58"), 4) is not None  # fp32: 6 x 4 = 24 bytes
    assert grouped_problem(parse_shape("64x32x64:nn:k=4,60"), 4) is None  # 4 fp32 are 16 bytes: aligned


# ----- defect 7: NVL chips -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["NVIDIA H100 NVL", "NVIDIA H200 NVL"])
def test_defect_7_nvl_cards_get_their_own_cited_peak_not_the_sxm_one(gpu: FakeGpu, name: str) -> None:
    gpu.name = name
    peak = FakeCudaBackend().peak(load_chips())
    assert peak.chip == name.split()[1].lower() + "-nvl"
    assert peak.tflops["bf16"] == 835.0 and "fp8" not in peak.tflops  # no uncited figure: fp8 has no peak
    assert "github.com" in peak.source


# ----- defect 8: gfx950's pre-swizzled block scales ------------------------------------------------------------------
def test_defect_8_rocm_block_scales_are_pre_swizzled_only_where_rocm_and_torch_have_it() -> None:
    assert rocm_scale_layout("mxfp4", "7.13.0-abc", True) == "32x8"
    assert rocm_scale_layout("mxfp8", "7.13.0-abc", True) == "none"  # MXFP8's 32x8 comes with ROCm 7.14
    assert rocm_scale_layout("mxfp8", "7.14.1", True) == "32x8"
    assert rocm_scale_layout("mxfp4", "7.14.1", False) == "none"  # the torch build lacks SWIZZLE_32_8
    assert rocm_scale_layout("mxfp4", "6.4.2", True) == "none"
    assert rocm_scale_layout("nvfp4", "7.14.1", True) == "none"


def test_defect_8_the_32x8_layout_goes_through_torchs_enum_and_builder(monkeypatch: pytest.MonkeyPatch) -> None:
    import enum
    import types

    import torch.nn.functional as F

    from mfu_sweep.measure.backends import scaled

    class Swizzle(enum.Enum):
        NO_SWIZZLE = 0
        SWIZZLE_32_4_4 = 1
        SWIZZLE_32_8 = 2

    built: list[bool] = []

    def to_blocked(scale: torch.Tensor, swizzle_32_8: bool = False) -> torch.Tensor:
        built.append(swizzle_32_8)
        return scale.flip(0)

    seen: dict[str, Any] = {}
    monkeypatch.setattr(F, "SwizzleType", Swizzle, raising=False)
    quantized = types.ModuleType("torch.testing._internal.common_quantized")  # torch's own holds to_blocked
    quantized.to_blocked = to_blocked  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch.testing._internal.common_quantized", quantized)
    monkeypatch.setattr(F, "scaled_mm", lambda *a, **k: seen.update(k), raising=False)
    assert scaled.rocm_32x8_swizzler() is not None
    scale = torch.arange(8, dtype=torch.uint8).reshape(2, 4)
    assert scaled.layout_scales(scale, "32x8").tolist() == scale.flip(0).flatten().tolist() and built == [True]
    op = scaled.scaled_op(get_dtype("mxfp4"), "32x8")
    op(torch.zeros(1, 2, 2), torch.zeros(1, 2, 2), None, (scale, scale))
    assert seen["swizzle_a"] is Swizzle.SWIZZLE_32_8 and seen["swizzle_b"] is Swizzle.SWIZZLE_32_8


# ----- defect 9: fp8 fast accumulation, offered both ways and recorded ---------------------------------------------
@pytest.mark.parametrize(("setting", "want"), [(None, True), ("on", True), ("off", False)])
def test_defect_9_fp8_fast_accum_is_passed_and_recorded(gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch,
                                                        setting: str | None, want: bool) -> None:
    if setting:
        monkeypatch.setenv(FAST_ACCUM_ENV, setting)
    calls: list[bool] = []
    real = torch._scaled_mm

    def spy(*args: Any, **kwargs: Any) -> torch.Tensor:
        calls.append(kwargs["use_fast_accum"])
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "_scaled_mm", spy)
    for dtype in ("fp8", "fp8-rowwise"):
        rec = run_task(FakeCudaBackend(timer="events"), task("64x64x64:nt", dtype))
        assert rec.status == "ok" and rec.extra["fast_accum"] is want
    assert calls and set(calls) == {want}


# ----- defect 10: no float64 on the scaled operands' path -----------------------------------------------------------
class DtypeLog(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.dtypes: set[torch.dtype] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.dtypes.add(t.dtype)
        return out


@pytest.mark.parametrize("dtype", ["fp8-rowwise", "mxfp8", "mxfp4", "nvfp4"])
def test_defect_10_scaled_operands_build_no_float64(gpu: FakeGpu, dtype: str) -> None:
    backend = FakeCudaBackend(timer="events")
    with DtypeLog() as log:
        inputs = operands.make_inputs_for(parse_shape("64x32x64:nt"), get_dtype(dtype), backend.torch_dtype(
            get_dtype(dtype)), 2, 0, torch.device("cpu"))
    assert torch.float64 not in log.dtypes and len(inputs.a) == 2


# ----- operands on the device, the profiler's parsing, the GPU's neighbours, one soak per run ---------------------
def test_cuda_operands_are_drawn_by_a_generator_on_the_device(gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[bool] = []
    real = operands.generator
    monkeypatch.setattr(operands, "generator", lambda seed, device, on_device: asked.append(on_device)
                        or real(seed, device, on_device))
    FakeCudaBackend().make_inputs(parse_shape("64x64x64"), get_dtype("bf16"), 2, seed=0)
    assert asked == [True]


class Event:
    def __init__(self, name: str, us: float, cuda: bool = False, parent: Any = None) -> None:
        self.name, self.cpu_parent = name, parent
        self.device_type = torch.autograd.DeviceType.CUDA if cuda else torch.autograd.DeviceType.CPU
        self.time_range = type("Range", (), {"elapsed_us": lambda _self: us})()


def test_profiler_timer_parses_cuda_kernels_and_top_level_gemm_ops() -> None:
    mm = Event("aten::mm", 40.0)
    events = [Event("sm90_xmma_gemm_bf16", 12.5, cuda=True), Event("sm90_xmma_gemm_bf16", 12.5, cuda=True),
              Event("cudaLaunchKernel", 3.0), mm, Event("aten::mm", 30.0, parent=mm), Event("aten::copy_", 9.0)]
    assert kernel_seconds(events) == (pytest.approx(25e-6), 2)
    assert op_seconds(events) == (pytest.approx(40e-6), 1)  # the nested mm is not counted twice


def test_gpu_neighbours_reads_other_processes_through_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml(monkeypatch, NvmlState(processes=[100, 200, 300], utilisation={200: 35, 300: 20, 100: 90}))
    probe = GpuNeighbours.for_device({"backend": "cuda", "uuid": "GPU-1", "index": 0})
    assert probe is not None and probe.note.startswith("NVML compute processes")
    seen = probe.read(own=[100])
    assert seen["other_processes"] == 2 and seen["other_pids"] == [200, 300]
    assert seen["other_sm_util"] == pytest.approx(0.55) and probe.last_ts > 0
    assert GpuNeighbours.for_device({"backend": "cuda", "hip_version": "7.0"}) is None


def test_soak_runs_in_the_first_worker_of_a_run_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from mfu_sweep.measure import worker

    requests: list[dict] = []

    class Worker:
        def __init__(self, env: Any = None) -> None:
            pass

        def request(self, args: dict, timeout: float | None) -> dict:
            requests.append(args)
            return {"hello": {}} if args["op"] == "hello" else {}

        def close(self, abandon: bool = False) -> None:
            pass

    monkeypatch.setattr(worker, "Worker", Worker)
    runner = worker.SubprocessRunner("cuda", None, None)
    runner.close()
    runner._start()  # the next pass's worker
    runner._start()  # a restart after a crash
    assert [r.get("soak", True) for r in requests] == [True, False, False]


def test_energy_meter_without_a_graph_counts_the_calls_asked(gpu: FakeGpu) -> None:
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    events = cuda_mod.event_block_timer(lambda: torch.mm(a, b), torch.device("cpu"))
    metered, log = metered_block_timer(events, lambda: gpu.energy_mj)
    for n in (1, 7, 9):
        metered(n)
    assert log.calls == 16 and math.isclose(log.millijoules, 16 * gpu.mj_per_kernel)


def test_defect_9_sweep_option_reaches_the_records_and_settings(tmp_path: Any) -> None:
    from click.testing import CliRunner

    from mfu_sweep.cli import main
    from mfu_sweep.records.results import load_sweeps

    out = tmp_path / "fp8.json"
    run = CliRunner().invoke(main, ["sweep", "--device", "cpu", "--dtype", "fp8", "--shape", "64x64x64:nt",
                                    "--fp8-fast-accum", "off", "--isolate", "none", "--quiet", "--repeats", "1",
                                    "--budget-s", "0.05", "-o", str(out)])
    assert run.exit_code == 0, run.output
    [sweep] = load_sweeps([out])
    assert sweep.settings["fp8_fast_accum"] == "off" and [r.extra["fast_accum"] for r in sweep.records] == [False]


def test_a_worker_whose_cuda_context_is_poisoned_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    from mfu_sweep.measure import worker
    from mfu_sweep.measure.task import blank_record

    started: list[int] = []
    errors = iter(["RuntimeError: CUDA error: device-side assert triggered", None])

    class Worker:
        def __init__(self, env: Any = None) -> None:
            started.append(1)

        def request(self, args: dict, timeout: float | None) -> dict:
            if args["op"] == "hello":
                return {"hello": {}}
            error = next(errors)
            rec = blank_record(task("64x64x64"), "error" if error else "unsupported", error or "no")
            return {"record": rec.to_json()}

        def close(self, abandon: bool = False) -> None:
            pass

    monkeypatch.setattr(worker, "Worker", Worker)
    runner = worker.SubprocessRunner("cuda", None, None)
    assert runner.run(task("64x64x64")).status == "error" and runner.worker is None  # closed: context gone
    runner.run(task("64x64x64"))
    assert len(started) == 2
