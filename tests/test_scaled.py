"""Row- and block-scaled dtypes: the recipes, the scale layout, the check's tolerance, fp8-rowwise for real on the
CPU, the one-line refusal of what the CPU cannot run, and the block-scaled peaks with their sources."""

from __future__ import annotations

import math

import pytest
import torch
from click.testing import CliRunner

from mfu_sweep.cli import main
from mfu_sweep.gemm.dtypes import DTYPES, get_dtype, quantized_tolerance
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.measure.backends.base import Unsupported
from mfu_sweep.measure.backends.cpu import CpuBackend
from mfu_sweep.measure.backends.scaled import (
    E2M1_VALUES,
    e2m1_codes,
    e2m1_values,
    pack_e2m1,
    quantize,
    spread_blocks,
    swizzle_scales,
    swizzled_offset,
)
from mfu_sweep.measure.bench import Task, run_task
from mfu_sweep.measure.timing import TimingConfig
from mfu_sweep.specs import BLOCK_SCALED, Peak, SpecError, load_chips, parse_chips

QUICK = TimingConfig(budget_s=0.02, min_samples=3, max_samples=5, min_block_s=1e-4, warmup_s=0.0)
QUANTIZED = [name for name, d in DTYPES.items() if d.quantized]


# ----- e2m1 and the scale layout ---------------------------------------------------------------------
def test_e2m1_rounds_to_nearest_even_saturates_and_packs_low_nibble_first() -> None:
    x = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, -0.3, -2.6, 0.0, 6.0])
    assert e2m1_values(e2m1_codes(x)).tolist() == [0, 1, 1, 2, 2, 4, 4, 6, -0.5, -3, 0, 6]
    grid = torch.tensor(E2M1_VALUES)
    assert torch.equal(e2m1_values(e2m1_codes(grid)).float(), grid)  # every value is its own code
    packed = pack_e2m1(e2m1_codes(torch.tensor([[1.0, -6.0, 0.5, 3.0]])))
    assert packed.dtype == torch.float4_e2m1fn_x2 and packed.shape == (1, 2)
    assert packed.view(torch.uint8).tolist() == [[0x2 | (0xF << 4), 0x1 | (0x5 << 4)]]


def test_swizzled_scales_follow_cublas_tile_formula() -> None:
    rows, cols = 200, 6
    scales = torch.arange(rows * cols, dtype=torch.int32).remainder(251).to(torch.uint8).reshape(rows, cols)
    flat = swizzle_scales(scales)
    assert flat.numel() == 256 * 8  # padded to whole 128 x 4 tiles
    # cuBLAS's block-scaling layout: tile (row // 128, col // 4) row by row, inside (r % 32) * 16 + (r // 32) * 4 + c
    assert swizzled_offset(0, 0, cols) == 0 and swizzled_offset(32, 0, cols) == 4 and swizzled_offset(1, 1, cols) == 17
    assert swizzled_offset(0, 4, cols) == 512 and swizzled_offset(128, 0, cols) == 1024
    for r, c in [(0, 0), (31, 3), (32, 0), (127, 5), (128, 2), (199, 5)]:
        assert flat[swizzled_offset(r, c, cols)] == scales[r, c]
    assert sorted(flat[swizzled_offset(torch.arange(rows)[:, None], torch.arange(cols), cols).flatten()].tolist()) \
        == sorted(scales.flatten().tolist())


# ----- the recipes and the check's tolerance -------------------------------------------------------
def _emulated_error(name: str, k: int, seed: int, misplace: bool = False) -> float:
    """Relative Frobenius error of the product the format stands for (dequantized in float64) against the
    unquantized float64 product; ``misplace`` gives every block of A another block's scale, as a kernel reading
    the scales in the wrong layout (row-major for swizzled, say) would."""
    dt = get_dtype(name)
    gen = torch.Generator().manual_seed(seed)
    a, b = (spread_blocks(torch.randn(rows, k, generator=gen), gen) for rows in (64, 48))
    qa, qb = quantize(a, dt), quantize(b, dt)
    va = qa.values.clone()
    if misplace:
        scale = qa.scale.to(torch.float64).reshape(64, -1)
        blocks = va.reshape(64, scale.shape[1], -1) / scale[:, :, None]
        shuffled = scale.flatten()[torch.randperm(scale.numel(), generator=gen)].reshape(scale.shape)
        va = (blocks * shuffled[:, :, None]).reshape(64, k)
    ref = a.double() @ b.double().T
    return float(torch.linalg.vector_norm(va @ qb.values.T - ref) / torch.linalg.vector_norm(ref))


@pytest.mark.parametrize("name", QUANTIZED)
def test_tolerance_is_derived_from_the_format_and_holds_the_recipe(name: str) -> None:
    dt = get_dtype(name)
    assert dt.rel_tolerance == quantized_tolerance(dt.significand_bits)
    assert dt.rel_tolerance == pytest.approx(math.sqrt(2) * 2.0**-dt.significand_bits + 2.0**-9)
    errors = [_emulated_error(name, k, seed) for k in (64, 512) for seed in range(2)]
    assert max(errors) < 0.6 * dt.rel_tolerance  # the recipe's real error sits well inside the bound
    assert min(errors) > 0.2 * dt.rel_tolerance  # and the bound is not loose enough to hide a format


@pytest.mark.parametrize("name", [n for n in QUANTIZED if get_dtype(n).block])
def test_misplaced_block_scales_fail_the_check(name: str) -> None:
    assert _emulated_error(name, 256, 0, misplace=True) > get_dtype(name).rel_tolerance


def test_byte_accounting_counts_block_scales_and_packed_fp4() -> None:
    s = Shape(1, 64, 32, 128, "nt")
    assert s.bytes(get_dtype("mxfp8")) == (64 * 128 + 128 * 32) * (1 + 1 / 32) + 64 * 32 * 2
    assert s.bytes(get_dtype("mxfp4")) == (64 * 128 + 128 * 32) * (0.5 + 1 / 32) + 64 * 32 * 2
    assert s.bytes(get_dtype("nvfp4")) == (64 * 128 + 128 * 32) * (0.5 + 1 / 16) + 64 * 32 * 2
    assert s.flops == 2 * 64 * 32 * 128  # scales cost no multiply-adds of their own


# ----- on the CPU, for real -------------------------------------------------------------------------
def test_fp8_rowwise_runs_for_real_on_the_cpu_and_is_checked() -> None:
    rec = run_task(CpuBackend(), Task(shape=Shape(1, 64, 48, 96, "nt"), dtype="fp8-rowwise", timing=QUICK))
    assert rec.status == "ok", rec.error
    assert 0.01 < rec.rel_error < get_dtype("fp8-rowwise").rel_tolerance  # quantization error, inside the bound
    assert rec.extra["scales"] == {"scaling": "row"} and rec.samples_s
    assert rec.extra["fp8_format"] == "e4m3fn"  # the element format it ran in, recorded (issue 48)


def test_the_check_catches_a_wrong_row_scale() -> None:
    backend, shape, dt = CpuBackend(), Shape(1, 64, 48, 96, "nt"), get_dtype("fp8-rowwise")
    inputs = backend.make_inputs(shape, dt, 1, seed=0)
    from mfu_sweep.measure.backends.operands import relative_error

    sa, sb = inputs.scales[0]
    good = relative_error(inputs, shape, 0, backend.gemm_fn(shape, dt, "eager", inputs)(0))
    inputs.scales[0] = (sa.flip(0).contiguous(), sb)  # each row scaled by another row's scale
    bad = relative_error(inputs, shape, 0, backend.gemm_fn(shape, dt, "eager", inputs)(0))
    assert good < dt.rel_tolerance < bad


@pytest.mark.parametrize("name", ["mxfp8", "mxfp4", "nvfp4"])
def test_block_scaled_formats_are_refused_on_the_cpu_saying_what_they_need(name: str) -> None:
    with pytest.raises(Unsupported) as err:
        CpuBackend().check_supported(get_dtype(name), "eager")
    text = str(err.value)
    assert text.startswith(f"{name} needs torch.nn.functional.scaled_mm on block-scaled tensor cores") \
        and "compute capability 10.x" in text and f"torch {torch.__version__} on cpu refuses it" in text


def test_sweep_refuses_a_block_scaled_dtype_in_one_line_before_any_shape(tmp_path) -> None:
    out = tmp_path / "mx.json"
    run = CliRunner().invoke(main, ["sweep", "--device", "cpu", "--dtype", "mxfp4", "--shape", "64x64x64",
                                    "--isolate", "none", "--quiet", "-o", str(out)])
    assert run.exit_code == 1 and not out.exists()
    [error] = [line for line in run.output.splitlines() if line.startswith("Error:")]
    assert error.startswith("Error: --dtype mxfp4: mxfp4 needs torch.nn.functional.scaled_mm") and \
        "drop --dtype mxfp4" in error
    assert "note: mxfp4 takes layout nt only" in run.output  # said, not done silently


# ----- peaks -------------------------------------------------------------------------------------------
CHIPS = load_chips()


def test_block_scaled_peaks_of_the_named_chips_each_have_a_source() -> None:
    have = {(c.id, d) for c in CHIPS.values() for d in c.peak_tflops if d in BLOCK_SCALED}
    assert {("b200", "mxfp8"), ("b200", "mxfp4"), ("b200", "nvfp4"), ("b300", "nvfp4"), ("gb300", "nvfp4"),
            ("mi355x", "mxfp4"), ("trn3", "mxfp8"), ("trn3", "mxfp4")} <= have
    for cid, d in have:
        assert CHIPS[cid].peak_sources[d], (cid, d)
        if "fp4" in d and "fp8" in CHIPS[cid].peak_tflops:
            assert CHIPS[cid].peak_tflops[d] >= CHIPS[cid].peak_tflops["fp8"]
    assert not any(d in BLOCK_SCALED for d in CHIPS["trn2"].peak_tflops)  # NeuronCore-v3 has no MX formats
    assert "mxfp8" not in CHIPS["mi355x"].peak_tflops  # no figure read: no peak, never an invented one


def test_a_block_scaled_peak_without_its_source_line_is_refused() -> None:
    entry = ('[[chip]]\nid = "x"\nname = "X"\nscope = "chip"\npeak_tflops = { bf16 = 100.0, mxfp4 = 400.0 }\n'
             'memory_gb = 80.0\nmemory_bandwidth_tbs = 2.0\nsource_title = "t"\nsource_url = "https://x"\n')
    with pytest.raises(SpecError, match="peak_tflops.mxfp4 needs a peak_sources line"):
        parse_chips(entry)


def test_fp8_rowwise_is_measured_against_the_fp8_figure_and_says_so() -> None:
    peak = Peak.from_chip(CHIPS["h100-sxm"])
    assert peak.for_dtype("fp8-rowwise") == CHIPS["h100-sxm"].peak_tflops["fp8"]
    assert "fp8 figure" in peak.dtype_basis["fp8-rowwise"]
    assert Peak.from_chip(CHIPS["b200"]).dtype_basis["mxfp4"] == CHIPS["b200"].peak_sources["mxfp4"]


def test_specs_lists_block_scaled_peaks_with_sources() -> None:
    out = CliRunner().invoke(main, ["specs"])
    assert out.exit_code == 0
    section = out.output.split("Block-scaled peaks (TFLOP/s) and their sources:")[1]
    for chip in ("b200", "b300", "gb300", "mi355x", "trn3"):
        assert any(line.split()[0] == chip and "<https://" in line for line in section.splitlines() if line), chip
