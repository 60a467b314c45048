"""Backend selection, device-name -> spec lookup, timer/dtype decisions, and the per-shape hooks.

No GPU or Neuron device exists here: the CUDA and Neuron code is tested
through its pure decision functions and by checking that it imports and
refuses cleanly; the hooks run for real on the CPU backend.
"""

from __future__ import annotations

import importlib
import json
import os
import time

import pytest
import torch
from click.testing import CliRunner

from mfu_sweep.cli import main
from mfu_sweep.cli.device import device_options_env
from mfu_sweep.gemm.dtypes import fp8_format, get_dtype
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.measure.backends import (
    AUTO_ORDER,
    REGISTRY,
    BackendError,
    DeviceRequest,
    auto_backend,
    parse_device,
    resolve_device,
)
from mfu_sweep.measure.backends.base import Telemetry, TorchBackend
from mfu_sweep.measure.backends.cpu import CpuBackend
from mfu_sweep.measure.backends.cuda import (
    GRAPH_BELOW_S,
    MIN_ROTATION_BYTES,
    TIMER_ENV,
    choose_timer,
    estimate_call_s,
    fp8_dtype_name,
    graph_calls,
    rotation_bytes_for,
    unsupported_reason,
)
from mfu_sweep.measure.backends.cuda_telemetry import (
    THROTTLING,
    Sampler,
    decode_throttle_reasons,
    reason_names,
    summarize_telemetry,
)
from mfu_sweep.measure.backends.generic import event_flush_timer
from mfu_sweep.measure.backends.neuron import (
    cache_delta,
    chip_family,
    logical_core_config,
    neuron_cc_flags,
    neuron_peak,
    stats_dict,
)
from mfu_sweep.measure.backends.operands import _rows
from mfu_sweep.measure.backends.xla import pjrt_target, spec_id_for_kind, xla_block_timer
from mfu_sweep.measure.bench import Task, run_task
from mfu_sweep.measure.timing import TimingConfig
from mfu_sweep.measure.worker import SOAK_ENV, hello
from mfu_sweep.specs import find_chip, load_chips

CHIPS = load_chips()
# These tests describe a machine without accelerators (CI); on one with a GPU they would not apply.
NO_ACCEL = pytest.mark.skipif(auto_backend() != "cpu", reason="an accelerator is present on this machine")
QUICK = {"target_rel_ci": 0.05, "budget_s": 0.1, "min_samples": 3, "max_samples": 10, "warmup_s": 0.0}


# ----- selection ---------------------------------------------------------------
def test_registry_holds_every_backend_and_auto_order_is_documented() -> None:
    assert set(REGISTRY) == {"cuda", "neuron", "xla", "accelerator", "cpu"}
    assert AUTO_ORDER == ("cuda", "neuron", "xla", "accelerator", "cpu")


@pytest.mark.parametrize(("text", "want"), [
    ("auto", DeviceRequest("auto", 0)), ("cpu", DeviceRequest("cpu", 0)), ("cuda:3", DeviceRequest("cuda", 3)),
    (" Neuron:1 ", DeviceRequest("neuron", 1)), ("xla", DeviceRequest("xla", 0)),
    ("accelerator:2", DeviceRequest("accelerator", 2)),
])
def test_parse_device(text: str, want: DeviceRequest) -> None:
    assert parse_device(text) == want


@pytest.mark.parametrize(("text", "needle"), [("tpu", "unknown device"), ("cuda:x", "not a non-negative"),
                                               ("cuda:-1", "not a non-negative")])
def test_parse_device_rejects(text: str, needle: str) -> None:
    with pytest.raises(BackendError, match=needle):
        parse_device(text)


def test_auto_order_follows_availability() -> None:
    assert auto_backend(available=lambda n: n in {"xla", "cpu"}) == "xla"
    assert auto_backend(available=lambda n: n in {"cuda", "neuron", "cpu"}) == "cuda"
    assert auto_backend(available=lambda n: n == "cpu") == "cpu"
    with pytest.raises(BackendError, match="no usable device"):
        auto_backend(available=lambda n: False)


@NO_ACCEL
def test_auto_on_this_machine_is_cpu() -> None:
    assert auto_backend() == "cpu"
    assert resolve_device("auto").name == "cpu"


@pytest.mark.parametrize("module", ["cuda", "neuron", "xla", "generic"])
def test_accelerator_modules_import_without_hardware(module: str) -> None:
    importlib.import_module(f"mfu_sweep.measure.backends.{module}")


@NO_ACCEL
@pytest.mark.parametrize("device", ["cuda", "cuda:3", "neuron", "neuron:1", "accelerator"])
def test_absent_device_is_a_one_line_backend_error(device: str) -> None:
    with pytest.raises(BackendError) as info:
        resolve_device(device)
    assert "\n" not in str(info.value) and str(info.value)


@NO_ACCEL
def test_cli_sweep_on_absent_cuda_is_one_line_error() -> None:
    res = CliRunner().invoke(main, ["sweep", "--device", "cuda", "--shape", "64x64x64", "-o", "x.json", "--quiet"])
    assert res.exit_code != 0
    assert "Traceback" not in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    errors = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and "CUDA" in errors[0], res.output


def test_cli_timer_option_only_for_cuda() -> None:
    res = CliRunner().invoke(main, ["sweep", "--device", "cpu", "--timer", "graph", "--shape", "64x64x64"])
    assert res.exit_code == 2 and "--timer" in res.output


# ----- spec lookup from what the frameworks report -------------------------------
@pytest.mark.parametrize(("reported", "chip"), [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA H200", "h200-sxm"),
    ("NVIDIA H200 NVL", "h200-nvl"), ("NVIDIA H100 NVL", "h100-nvl"), ("AMD Instinct MI300X", "mi300x"),
    ("AMD Instinct MI300X VF", "mi300x"),
    ("NVIDIA GB200", "gb200"), ("NVIDIA B200", "b200"), ("NVIDIA A100-SXM4-80GB", "a100-sxm"),
    ("NVIDIA L4", "l4"), ("NVIDIA L40S", "l40s"), ("AMD Instinct MI250X", "mi250x"), ("AMD Instinct MI355X", "mi355x"),
])
def test_cuda_device_names_map_to_specs(reported: str, chip: str) -> None:
    found = find_chip(reported, CHIPS)
    assert found is not None and found.id == chip


@pytest.mark.parametrize(("kind", "chip"), [("NC_v2", "trn1-nc"), ("NC_v3", "trn2-lnc1"), ("NC_v3d", "trn2-lnc2"),
                                            ("TPU v4", "tpu-v4"), ("TPU v5 lite", "tpu-v5e"), ("cpu", "cpu")])
def test_xla_device_kinds_map_to_specs(kind: str, chip: str) -> None:
    assert spec_id_for_kind(kind, CHIPS) == chip


def test_unknown_xla_kind_has_no_spec() -> None:
    assert spec_id_for_kind("FOO_v9", CHIPS) is None


# ----- CUDA decisions ---------------------------------------------------------------
def test_estimate_call_s_is_the_roofline_time() -> None:
    big, small = Shape(1, 4096, 4096, 4096), Shape(1, 256, 256, 256)
    bf16 = get_dtype("bf16")
    assert estimate_call_s(big, bf16, 989.4, 3.35) == pytest.approx(big.flops / 989.4e12)
    # small GEMMs are bandwidth-bound at peak: bytes / bandwidth wins
    assert estimate_call_s(small, bf16, 989.4, 3.35) == pytest.approx(small.bytes(bf16) / 3.35e12)


@pytest.mark.parametrize(("est", "override", "mode", "want"), [
    (1e-6, "auto", "eager", "graph"), (1e-3, "auto", "eager", "events"), (1e-6, "auto", "compile", "events"),
    (1e-3, "graph", "eager", "graph"), (1e-6, "events", "eager", "events"), (1e-6, "graph", "compile", "graph"),
    (GRAPH_BELOW_S, "auto", "eager", "events"),
])
def test_choose_timer(est: float, override: str, mode: str, want: str) -> None:
    assert choose_timer(est, override, mode) == want


def test_choose_timer_rejects_unknown_override() -> None:
    with pytest.raises(ValueError, match="cupti"):
        choose_timer(1e-3, "cupti")


def test_auto_timer_for_real_shapes_on_h100() -> None:
    h100 = CHIPS["h100-sxm"]
    bf16 = get_dtype("bf16")

    def pick(s: int) -> str:
        est = estimate_call_s(Shape(1, s, s, s), bf16, h100.peak_tflops["bf16"], h100.memory_bandwidth_tbs)
        return choose_timer(est)

    assert pick(256) == "graph" and pick(1024) == "graph" and pick(8192) == "events"


@pytest.mark.parametrize(("sets", "calls"), [(1, 16), (3, 18), (16, 16), (20, 20), (64, 64)])
def test_graph_calls_are_whole_passes(sets: int, calls: int) -> None:
    assert graph_calls(sets) == calls and calls % sets == 0


def test_rotation_defeats_l2_and_infinity_cache() -> None:
    assert rotation_bytes_for(None) == MIN_ROTATION_BYTES
    assert rotation_bytes_for(50 * 2**20) == MIN_ROTATION_BYTES  # H100: 4 x 50 MB < 512 MiB floor
    assert rotation_bytes_for(256 * 2**20) == 4 * 256 * 2**20


@pytest.mark.parametrize(("hip", "arch", "want"), [(False, "sm_90", "float8_e4m3fn"), (True, "gfx942:sramecc+:xnack-",
                                                   "float8_e4m3fnuz"), (True, "gfx950", "float8_e4m3fn")])
def test_fp8_dtype_per_vendor(hip: bool, arch: str, want: str) -> None:
    assert fp8_dtype_name(hip, arch) == want
    # the record's fp8_format is read off that very name (bench.py): gfx942 runs e4m3fnuz, not "fp8" alike
    assert fp8_format(f"torch.{fp8_dtype_name(hip, arch)}") == want.removeprefix("float8_")


@pytest.mark.parametrize(("dtype", "cc", "hip", "arch", "bad"), [
    ("fp8", (8, 0), False, "sm_80", True), ("fp8", (8, 9), False, "sm_89", False),
    ("fp8", (9, 0), False, "sm_90", False), ("fp8", (9, 4), True, "gfx942", False),
    ("fp8", (9, 0), True, "gfx90a", True), ("tf32", (7, 0), False, "sm_70", True),
    ("tf32", (8, 0), False, "sm_80", False), ("tf32", (9, 4), True, "gfx942", True),
    ("bf16", (9, 0), False, "sm_90", False), ("fp32", (7, 0), False, "sm_70", False),
])
def test_unsupported_reason(dtype: str, cc: tuple[int, int], hip: bool, arch: str, bad: bool) -> None:
    reason = unsupported_reason(dtype, cc, hip, arch)
    assert (reason is not None) == bad
    if bad:
        assert dtype in reason


def test_bf16_unsupported_when_torch_says_so() -> None:
    assert unsupported_reason("bf16", (7, 0), False, "sm_70", bf16_ok=False)


def test_decode_throttle_reasons_with_pynvmls_own_constants() -> None:
    pynvml = pytest.importorskip("pynvml")  # nvidia-ml-py, a test dependency: its constants, not hand-copied bits
    names = reason_names(pynvml)
    assert decode_throttle_reasons(0, names) == []
    mask = pynvml.nvmlClocksEventReasonSwPowerCap | pynvml.nvmlClocksEventReasonHwThermalSlowdown
    assert decode_throttle_reasons(mask, names) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert names[pynvml.nvmlClocksEventReasonGpuIdle] == "gpu_idle"
    # the renamed bit keeps its first name; masks (All, None) are no reasons; older names fill the gaps
    assert names[pynvml.nvmlClocksEventReasonUserDefinedClocks] == "applications_clocks_setting"
    assert all(bit & (bit - 1) == 0 for bit in names) and "board_limit" in names.values()
    assert THROTTLING <= set(names.values())
    assert decode_throttle_reasons(1 << 30, names) == ["unknown_0x40000000"]


def test_summarize_telemetry_records_power_cap_and_flags_low_busy_clock() -> None:
    # the first sample is read before the first GEMM (idle); the power cap alone is no throttling (nvbench's rule)
    capped = [{"sm_clock_mhz": 345, "power_w": 90.0, "temp_c": 40, "throttle_reasons": ["gpu_idle"]},
              {"sm_clock_mhz": 1980, "power_w": 690.0, "temp_c": 60, "throttle_reasons": ["sw_power_cap"]},
              {"sm_clock_mhz": 1755, "power_w": 700.0, "temp_c": 62, "throttle_reasons": []}]
    seen = summarize_telemetry(capped, 1980)
    assert seen.flags == ()
    tel = seen.extra["telemetry"]
    assert tel["sm_clock_mhz"] == {"min": 345.0, "median": 1755.0, "max": 1980.0}
    assert tel["busy_sm_clock_mhz"] == 1867.5 and tel["power_capped"] is True
    assert tel["throttle_reasons"] == ["gpu_idle", "sw_power_cap"] and "throttled_because" not in tel
    slow = summarize_telemetry([{"sm_clock_mhz": 345}, {"sm_clock_mhz": 1000, "throttle_reasons": []}], 1980)
    assert slow.flags == ("throttled",) and "sm_clock 1000" in slow.extra["telemetry"]["throttled_because"][0]
    hot = summarize_telemetry([{"sm_clock_mhz": 1980}, {"sm_clock_mhz": 1900,
                                                        "throttle_reasons": ["hw_thermal_slowdown"]}], 1980)
    assert hot.flags == ("throttled",) and hot.extra["telemetry"]["throttled_because"] == ["hw_thermal_slowdown"]
    fine = summarize_telemetry([{"sm_clock_mhz": 1980, "throttle_reasons": ["gpu_idle"]}], 1980)
    assert fine.flags == () and "throttled_because" not in fine.extra["telemetry"]
    assert summarize_telemetry([], 1980) == Telemetry()


def test_sampler_reads_at_start_during_and_at_stop() -> None:
    ticks = iter(range(10_000))
    sampler = Sampler(lambda: {"n": next(ticks)}, interval_s=0.005)
    sampler.start()
    deadline = time.monotonic() + 60  # until the thread has read once (not a timing assertion: load delays it)
    while len(sampler.samples) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    samples = sampler.stop()
    assert len(samples) >= 3 and samples[0]["n"] == 0
    assert [s["n"] for s in samples] == sorted(s["n"] for s in samples)


def test_sampler_survives_a_failing_reader() -> None:
    calls = iter(range(10_000))

    def read() -> dict:
        n = next(calls)
        if n % 2:
            raise OSError("driver hiccup")
        return {"sm_clock_mhz": 1000.0 + n}

    sampler = Sampler(read, interval_s=0.005)
    sampler.start()
    time.sleep(0.05)
    samples = sampler.stop()
    assert any("error" in s and "driver hiccup" in s["error"] for s in samples)
    summary = summarize_telemetry(samples, 2000.0)
    assert summary.extra["telemetry"]["samples"] == len(samples)


def test_numerical_check_gathers_float8_rows() -> None:
    """fp8 outputs are checked row-wise too: gathered as bytes, so devices without float8 gather work."""
    x = torch.randn(64, 16).to(torch.float8_e4m3fn)
    rows = torch.tensor([5, 0, 63])
    assert torch.equal(_rows(x, rows).float(), x.float()[[5, 0, 63]])
    y = torch.randn(64, 16)
    assert torch.equal(_rows(y, rows), y[[5, 0, 63]])


# ----- Neuron decisions ---------------------------------------------------------------
@pytest.mark.parametrize(("existing", "dtype", "want"), [
    ("", "fp32", "--auto-cast=none"),
    ("--foo --auto-cast matmult --auto-cast-type=bf16 -O1", "fp32", "--foo -O1 --auto-cast=none"),
    ("--auto-cast=all", "bf16", "--auto-cast=none"),
    ("--cache_dir=/x", "tf32", "--cache_dir=/x --auto-cast=matmult --auto-cast-type=tf32"),
])
def test_neuron_cc_flags(existing: str, dtype: str, want: str) -> None:
    assert neuron_cc_flags(existing, dtype) == want


@pytest.mark.parametrize(("texts", "family"), [(("trn2.48xlarge",), "trn2"), ((None, "trn3.48xlarge"), "trn3"),
                                               (("Trainium2",), "trn2"), (("inf2.xlarge",), "inf2"),
                                               (("trn1.32xlarge",), "trn1"), (("m7i.large", None), None),
                                               # get_device_properties(i).name is the runtime's instance family
                                               (("trn2n", None, None), "trn2"), (("trn3u", "trn3"), "trn3"),
                                               ((None, "trn2", "trn2.48xlarge"), "trn2")])
def test_chip_family(texts: tuple[str | None, ...], family: str | None) -> None:
    assert chip_family(*texts) == family


def test_logical_core_config() -> None:
    assert logical_core_config("trn2", {}) == (2, "default")
    assert logical_core_config("trn1", {}) == (1, "default")
    assert logical_core_config("trn2", {"NEURON_LOGICAL_NC_CONFIG": "1"}) == (1, "env")
    with pytest.raises(BackendError, match="must be 1 or 2"):
        logical_core_config("trn2", {"NEURON_LOGICAL_NC_CONFIG": "4"})


def test_neuron_peak_is_per_logical_core() -> None:
    lnc2 = neuron_peak("trn2", 2, CHIPS)
    assert lnc2 is not None and lnc2.chip == "trn2-lnc2" and lnc2.scope == "core"
    assert lnc2.tflops["bf16"] == pytest.approx(667.0 / 4)
    assert neuron_peak("trn2", 1, CHIPS).chip == "trn2-lnc1"
    trn3 = neuron_peak("trn3", 2, CHIPS)
    assert trn3.scope == "core" and trn3.chip == "trn3-lnc2" and "derived" in trn3.source
    assert trn3.tflops["bf16"] == pytest.approx(671.0 / 4)
    assert trn3.memory_bandwidth_tbs == pytest.approx(4.9 / 4)
    assert neuron_peak(None, 2, CHIPS) is None


def test_neff_cache_stats_from_mapping_or_object() -> None:
    class Stats:
        persistent_hits, persistent_misses, total_entries, hit_rate = 3, 1, 4, 0.75

    assert stats_dict({"persistent_hits": 3, "persistent_misses": 1, "total_entries": 4, "note": "x",
                       "enabled": True}) == {"persistent_hits": 3, "persistent_misses": 1, "total_entries": 4}
    assert stats_dict(Stats()) == {"persistent_hits": 3, "persistent_misses": 1, "total_entries": 4}


def test_neff_cache_delta_counts_one_shape() -> None:
    before = {"persistent_hits": 3, "persistent_misses": 1, "in_memory_hits": 10, "total_entries": 4,
              "total_compilation_time_ms": 1500.0}
    after = {"persistent_hits": 3, "persistent_misses": 2, "in_memory_hits": 12, "total_entries": 5,
             "total_compilation_time_ms": 3750.0}
    got = cache_delta(before, after)
    assert got == {"persistent_hits": 0, "persistent_misses": 1, "in_memory_hits": 2, "compile_s": 2.25,
                   "total_entries": 5}
    assert cache_delta({}, {"persistent_misses": 1})["compile_s"] is None


# ----- XLA decisions ------------------------------------------------------------------
def test_pjrt_target() -> None:
    assert pjrt_target({"PJRT_DEVICE": "cpu"}, False, False) == "CPU"
    assert pjrt_target({}, True, False) == "NEURON"
    assert pjrt_target({}, False, True) == "TPU"
    assert pjrt_target({}, False, False) is None


def test_xla_block_timer_runs_whole_graphs_and_scales() -> None:
    calls, steps, waits = [], [], []
    now = [0]

    def clock_ns() -> int:
        now[0] += 1_000_000  # every read advances 1 ms
        return now[0]

    timer = xla_block_timer(lambda: calls.append(1), 8, lambda: steps.append(1), lambda: waits.append(1), clock_ns)
    assert timer(1) == pytest.approx(1e-3)  # first graph: unscaled (it holds the compile)
    assert len(calls) == 8 and len(steps) == 1
    calls.clear()
    steps.clear()
    assert timer(20) == pytest.approx(1e-3 * 20 / 24)  # 3 graphs of 8 calls, scaled to 20 calls
    assert len(calls) == 24 and len(steps) == 3


# ----- hooks, for real on the CPU backend ------------------------------------------------
class _ObservingCpu(CpuBackend):
    """The real CPU backend plus a telemetry hook that reports what it saw."""

    def telemetry_start(self) -> None:
        self.started = True

    def telemetry_stop(self) -> Telemetry:
        return Telemetry(extra={"telemetry": {"seen": self.started}}, flags=("throttled",), compile_s=0.25)


def test_telemetry_hooks_reach_the_record() -> None:
    from mfu_sweep.measure.timing import TimingConfig

    rec = run_task(_ObservingCpu(), Task(shape=Shape(1, 64, 64, 64), dtype="fp32", timing=TimingConfig(**QUICK)))
    assert rec.status == "ok"
    assert rec.extra["telemetry"] == {"seen": True}
    assert "throttled" in rec.flags and rec.compile_s == 0.25
    assert json.loads(json.dumps(rec.to_json()))["telemetry"] == {"seen": True}


def test_default_hooks_add_nothing() -> None:
    assert TorchBackend.telemetry_stop(CpuBackend()) == Telemetry()
    timer, name = CpuBackend().block_timer(lambda: None)
    assert name == "host" and timer(3) >= 0


def test_soak_runs_for_the_requested_time() -> None:
    out = CpuBackend().soak(0.2)
    assert out["seconds"] >= 0.2 and out["calls"] >= 1 and out["tflops"] > 0
    assert out["shape"] == "512x512x512" and out["dtype"] == "fp32"


def test_hello_records_soak_and_requested_device() -> None:
    _, info = hello("auto", None, None, soak_s=0.05)
    assert info["device"]["requested"] == "auto" and info["device"]["backend"] == "cpu"
    assert info["environment"]["soak"]["seconds"] >= 0.05
    # glibc's mmap threshold is held fixed, so operand placement does not follow the order of the shapes
    import platform

    if platform.libc_ver()[0] == "glibc":
        assert info["environment"]["malloc_mmap_threshold"] == 128 * 1024


def test_device_options_env_is_restored() -> None:
    before = {k: os.environ.get(k) for k in (TIMER_ENV, SOAK_ENV)}
    with device_options_env("graph", 3.0):
        assert os.environ[TIMER_ENV] == "graph" and float(os.environ[SOAK_ENV]) == 3.0
    assert {k: os.environ.get(k) for k in (TIMER_ENV, SOAK_ENV)} == before


def test_sweep_records_timer_and_soak_settings(tmp_path: os.PathLike) -> None:
    out = os.path.join(tmp_path, "s.json")
    res = CliRunner().invoke(main, ["sweep", "--device", "cpu", "--shape", "64x64x64", "--isolate", "none",
                                    "--soak", "0.1", "--budget-s", "0.1", "-o", out, "--quiet"])
    assert res.exit_code == 0, res.output
    data = json.loads(open(out).read())
    assert data["settings"]["timer"] == "auto" and data["settings"]["soak_s"] == 0.1
    assert data["environment"]["soak"]["seconds"] >= 0.1
    assert SOAK_ENV not in os.environ


class SlowFlushCpu(CpuBackend):
    """The real CPU backend whose flush also sleeps: a timed flush would show up as >= 20 ms per call."""

    def make_flush(self):
        zero = super().make_flush()

        def flush() -> None:
            zero()
            time.sleep(0.02)

        return flush


def test_cache_flush_on_cpu_times_the_gemm_not_the_flush() -> None:
    task = Task(shape=Shape(1, 128, 128, 128), dtype="fp32", cache="flush",
                timing=TimingConfig(budget_s=0.3, max_samples=10))
    threads = torch.get_num_threads()
    try:  # one thread: a multi-threaded tiny GEMM on a loaded 2-core machine can wait a scheduler slice
        rec = run_task(SlowFlushCpu(threads=1), task)
    finally:
        torch.set_num_threads(threads)
    assert rec.status == "ok" and rec.timer == "host+flush" and rec.rel_error < 1e-5
    assert rec.extra["cache"] == "flush" and rec.extra["input_sets"] == 1
    # a 4 MFLOP GEMM, never the sleep: time.sleep(0.02) alone lasts >= 20 ms, so a sample that timed the flush is
    # at least that whatever the load, while load would have to stretch the GEMM (well under 1 ms) 20-fold or more
    assert max(rec.samples_s) < 0.02, rec.samples_s


def test_cache_none_times_one_hot_operand_set_as_timer_does() -> None:
    """--cache none: one operand set (what torch's Timer times), against rotate's many sets for the same shape."""
    timing = TimingConfig(budget_s=0.2, max_samples=5)
    hot = run_task(CpuBackend(), Task(shape=Shape(1, 256, 256, 256), dtype="fp32", cache="none", timing=timing))
    cold = run_task(CpuBackend(), Task(shape=Shape(1, 256, 256, 256), dtype="fp32", timing=timing))
    assert hot.status == "ok" and hot.timer == "host" and hot.rel_error < 1e-5
    assert hot.extra["cache"] == "none" and hot.extra["input_sets"] == 1
    assert cold.extra["cache"] == "rotate" and cold.extra["input_sets"] > 1


def test_cache_policy_is_validated_and_travels_to_the_worker() -> None:
    with pytest.raises(ValueError, match="cache='cold'"):
        Task(shape=Shape(1, 8, 8, 8), dtype="fp32", cache="cold")
    task = Task(shape=Shape(1, 8, 8, 8), dtype="fp32", cache="flush")
    assert Task.from_json(json.loads(json.dumps(task.to_json()))) == task


def test_event_flush_timer_queues_flush_before_each_start_event() -> None:
    """Logic only, with stand-in events on a fake clock: CUDA/Neuron events need their devices."""
    log: list[str] = []
    now = [0.0]

    class Event:
        def record(self) -> None:
            self.t = now[0]
            log.append("record")

        def synchronize(self) -> None:
            log.append("sync-event")

        def elapsed_time(self, end: Event) -> float:
            return (end.t - self.t) * 1e3

    def flush() -> None:
        log.append("flush")
        now[0] += 1.0

    def call() -> None:
        log.append("call")
        now[0] += 0.002

    made = []
    timer = event_flush_timer(call, flush, lambda: made.append(Event()) or made[-1], lambda: log.append("sync"))
    assert timer(3) == pytest.approx(0.006)
    assert log == ["sync", *["flush", "record", "call", "record"] * 3, "sync-event", "sync"]
    timer(2)
    assert len(made) == 6  # event pairs are reused across blocks


@pytest.mark.parametrize("dtype,cap,hip,arch,fragment", [
    ("mxfp8", (9, 0), False, "sm_90", "mxfp8 needs compute capability 10.x, this GPU has 9.0"),
    ("mxfp8", (10, 0), False, "sm_100", None), ("mxfp4", (10, 3), False, "sm_103", None),
    ("nvfp4", (12, 0), False, "sm_120", "nvfp4 needs compute capability 10.x, this GPU has 12.0"),
    ("nvfp4", (9, 5), True, "gfx950", "nvfp4 needs no AMD GPU (NVFP4 is NVIDIA's format), this is gfx950"),
    ("mxfp4", (9, 5), True, "gfx950", None), ("mxfp8", (9, 4), True, "gfx942", "mxfp8 needs AMD gfx95x"),
    ("fp8-rowwise", (8, 9), False, "sm_89", None), ("fp8-rowwise", (8, 6), False, "sm_86",
     "fp8-rowwise needs compute capability >= 8.9, this GPU has 8.6"),
    ("fp8-rowwise", (10, 0), False, "sm_100", None), ("fp8-rowwise", (9, 4), True, "gfx942", None),
])
def test_scaled_formats_by_gpu_architecture(dtype: str, cap: tuple, hip: bool, arch: str,
                                            fragment: str | None) -> None:
    reason = unsupported_reason(dtype, cap, hip, arch)
    assert reason == fragment if fragment is None else reason.startswith(fragment)


@pytest.mark.parametrize("text", ["256x256x256", "2x32x48x16", "256x256x256:nt"])
def test_compile_mode_times_the_gemm_alone_not_a_copy_into_the_output_buffer(text: str) -> None:
    """Inductor compiles ``torch.mm(a, b, out=c)`` and ``torch.bmm`` to a GEMM into its own buffer plus a copy
    kernel into ``c``: compile mode times the allocating op, whose generated code is the GEMM alone."""
    from torch._inductor.utils import run_and_get_code

    from mfu_sweep.gemm.shapes import parse_shape

    backend, shape, dt = CpuBackend(), parse_shape(text), get_dtype("fp32")
    inputs = backend.make_inputs(shape, dt, 1, 0)
    torch._dynamo.reset()
    got, code = run_and_get_code(backend.gemm_fn(shape, dt, "compile", inputs), 0)
    (source,) = code
    call = source[source.index("def call"):]
    assert "cpp_fused" not in source and call.count("extern_kernels.") == 1, call  # the GEMM, and nothing after it
    torch.testing.assert_close(got.reshape(inputs.out[0].shape), backend.gemm_fn(shape, dt, "eager", inputs)(0)
                               .reshape(inputs.out[0].shape))
