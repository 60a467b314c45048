"""mfu_sweep.api: each function gives the command line's numbers for the committed sweeps, as a DataFrame with the
columns docs/api.md lists; pandas is an optional import whose absence is one line naming the extra."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from mfu_sweep import api
from mfu_sweep.cli import main

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "sweeps" / "published"
PAIR = [str(PUBLISHED / "sm_100_B200.json"), str(PUBLISHED / "gfx950.json")]
DEEPBENCH = sorted(str(p) for p in PUBLISHED.glob("*.json") if p.stem.startswith(("NV_", "AMD_")))
STEPS = [str(ROOT / "sweeps" / f"amd-epyc-zen4-cpu-steps-{c}.json") for c in ("warm", "cold")]
STEPS_FAMILY = "llm:llama-3-8b:tokens=32:tp=8:lm_head=0"


def _cli_json(*args: str, code: int = 0) -> dict:
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code == code, res.output
    return json.loads(res.stdout)


def _same(x: object, y: object) -> bool:
    """Equal, or both missing (None from JSON, NaN or None in a frame)."""
    missing = [v is None or (isinstance(v, float) and math.isnan(v)) for v in (x, y)]
    return all(missing) if any(missing) else x == y


def test_bands_are_compares_json_band_for_band_the_measured_goal() -> None:
    frame = api.bands(PAIR, metric="tflops")
    assert list(frame.columns[:13]) == list(api.BAND_COLUMNS)
    cli = _cli_json("compare", *PAIR, "--metric", "tflops", "--json")["comparisons"]
    expected = [(c, b) for c in cli for b in c["bands"]]
    assert len(frame) == len(expected) > 10
    for (_, row), (c, band) in zip(frame.iterrows(), expected, strict=True):
        assert (row["a"], row["b"], row["dtype"], row["mode"]) == (c["a"], c["b"], c["dtype"], c["mode"])
        for col in ("low_flops", "high_flops", "ratio", "ratio_low", "ratio_high", "verdict", "leader", "matched",
                    "p_adjusted"):
            assert _same(row[col], band[col]), (col, row[col], band[col])
        assert row["model_based"] == band["n_shapes"] - band["matched"]
    assert set(frame["verdict"]) >= {"a", "b", "ambiguous"} and frame.attrs["notes"] == []


def test_bands_by_mfu_and_options_select_pairs_and_dtypes() -> None:
    frame = api.bands(PAIR, metric="mfu", dtype="bfloat16", a="sm_100_B200")
    cli = _cli_json("compare", *PAIR, "--a", "sm_100_B200", "--json")["comparisons"]
    bf16 = [b for c in cli if c["dtype"] == "bf16" for b in c["bands"]]
    assert set(frame["dtype"]) == {"bf16"} and set(frame["a"]) == {"sm_100_B200"}
    assert frame["ratio"].tolist() == [b["ratio"] for b in bf16]


def test_crossovers_are_compares_json_crossovers() -> None:
    frame = api.crossovers(PAIR, fit_n_boot=50)
    assert list(frame.columns[:11]) == list(api.CROSSOVER_COLUMNS)
    cli = _cli_json("compare", *PAIR, "--metric", "tflops", "--fit-n-boot", "50", "--json")["comparisons"]
    expected = [(c, x) for c in cli for x in c["crossovers"]]
    assert len(frame) == len(expected) > 0
    for (_, row), (c, x) in zip(frame.iterrows(), expected, strict=True):
        assert (row["a"], row["b"], row["dtype"], row["from_label"], row["to_label"], row["method"]) == (
            c["a"], c["b"], c["dtype"], x["from"], x["to"], x["method"])
        assert (row["flops"], row["low_flops"], row["high_flops"]) == (x["flops"], x["low_flops"], x["high_flops"])


def test_records_are_the_csv_export_row_for_row() -> None:
    path = str(ROOT / "sweeps" / "amd-epyc-cpu-compile.json")
    frame = api.records(path)
    assert list(frame.columns[:16]) == list(api.RECORD_COLUMNS)
    res = CliRunner().invoke(main, ["export", path, "--format", "csv"])
    assert res.exit_code == 0, res.output
    csv = pd.read_csv(io.StringIO(res.stdout))
    assert len(frame) == len(csv) > 10
    assert set(csv.columns) == set(frame.columns)
    for col in ("flops", "bytes", "median_s", "tflops", "mfu", "m", "n", "k", "batch"):
        assert frame[col].astype(float).tolist() == pytest.approx(csv[col].astype(float).tolist(), rel=1e-15,
                                                                   nan_ok=True), col
    for col in ("label", "dtype", "mode", "layout", "status"):
        assert frame[col].tolist() == csv[col].tolist(), col
    assert frame["flags"].fillna("").tolist() == csv["flags"].fillna("").tolist()


def test_records_take_torch_dtype_names_and_refuse_an_unknown_one_naming_it() -> None:
    path = str(ROOT / "sweeps" / "amd-epyc-zen5-cpu.json")
    assert set(api.records(path, dtype="bfloat16")["dtype"]) == {"bf16"}
    assert set(api.records(path, dtype=["torch.float32"])["dtype"]) == {"fp32"}
    with pytest.raises(ValueError, match="unknown dtype 'bfloat17'"):
        api.records(path, dtype="bfloat17")
    with pytest.raises(ValueError, match="--dtype fp8 matches no records"):
        api.records(path, dtype="fp8")


def test_fits_are_fits_json() -> None:
    path = str(ROOT / "sweeps" / "amd-epyc-zen5-cpu.json")
    frame = api.fits(path, n_boot=20)
    assert list(frame.columns[:14]) == list(api.FIT_COLUMNS)
    cli = _cli_json("fit", path, "--n-boot", "20", "--json")["fits"]
    assert len(frame) == len(cli) == 2
    for (_, row), fit in zip(frame.iterrows(), cli, strict=True):
        assert (row["label"], row["dtype"], row["mode"], row["model"]) == (fit["label"], fit["dtype"], fit["mode"],
                                                                           fit["model"])
        assert row["p_tflops"] == fit["p_tflops"]
        assert (row["p_tflops_low"], row["p_tflops_high"]) == tuple(fit["p_tflops_ci"])
        assert (row["t0_s_low"], row["t0_s_high"]) == tuple(fit["t0_s_ci"])


def test_steps_are_predict_steps_json() -> None:
    frame = api.steps(STEPS, steps="1,10,1000", dtype="float32", n_boot=200)
    assert list(frame.columns[:13]) == list(api.STEP_COLUMNS)
    cli = _cli_json("predict", *STEPS, "--model", STEPS_FAMILY, "--dtype", "fp32", "--steps", "1,10,1000",
                    "--n-boot", "200", "--json")
    expected = [(s, t) for s in cli["series"] for t in s["time_to_n_s"]]
    assert len(frame) == len(expected) >= 6
    for (_, row), (s, t) in zip(frame.iterrows(), expected, strict=True):
        assert (row["label"], row["mode"], row["n"]) == (s["label"], s["mode"], t["n"])
        assert (row["time_s"], row["time_s_low"], row["time_s_high"]) == (t["value"], t["low"], t["high"])
        assert row["steady_step_s"] == s["steady_step_s"]["value"]
    same = api.steps(STEPS, steps=[1, 10, 1000], model=STEPS_FAMILY, dtype="fp32", n_boot=200)
    assert same["time_s"].tolist() == frame["time_s"].tolist()


def test_steps_without_a_model_family_say_what_sweeps_they_need() -> None:
    with pytest.raises(ValueError, match="sweep --shapes llm:"):
        api.steps(PAIR)


def test_gate_is_compare_fail_on_json() -> None:
    ok, frame = api.gate(DEEPBENCH)
    assert list(frame.columns[:7]) == list(api.GATE_COLUMNS)
    cli = _cli_json("compare", *DEEPBENCH, "--metric", "tflops", "--fail-on", "slower", "--json", code=1)["gate"]
    assert ok is cli["passed"] is False and frame.attrs["line"] == cli["line"]
    failed = frame[~frame["passed"]]
    assert sorted(zip(failed["label"], failed["dtype"], failed["mean_ratio"], strict=True)) == sorted(
        (f["label"], f["dtype"], f["mean_ratio"]) for f in cli["failures"])
    assert len(set(frame["label"])) == cli["checked"] and (frame["verdict"] == "pass").any()


def test_gate_with_nothing_to_rank_is_an_error_naming_what_is_needed() -> None:
    from mfu_sweep.analysis.fleet.gate import GateError

    with pytest.raises(GateError, match="needs devices to rank"):
        api.gate(PAIR)


def test_paths_may_be_one_path_and_none_is_an_error() -> None:
    assert len(api.records(Path(PAIR[0]))) == len(api.records([PAIR[0]]))
    with pytest.raises(ValueError, match="paths is empty"):
        api.records([])


def test_without_pandas_the_error_is_one_line_naming_the_extra() -> None:
    code = textwrap.dedent(f"""
        import sys
        sys.modules["pandas"] = None  # import pandas now raises ImportError
        from mfu_sweep import api
        try:
            api.records({PAIR[0]!r})
        except ImportError as exc:
            print("ImportError:", exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert "\n" not in line and "pip install 'mfu-sweep[api]'" in line and "pandas is not installed" in line
