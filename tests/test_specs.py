from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mfu_sweep.specs import (
    PEAK_DTYPES,
    Peak,
    SpecError,
    apply_peak_override,
    find_chip,
    get_chip,
    load_chips,
    parse_chips,
)
from mfu_sweep.specs.cpu import estimate_cpu_peak, fp32_flop_per_cycle, half_flop_per_cycle

CHIPS = load_chips()

# Every chip of shared/research/peak-specs.md must be present.
EXPECTED_IDS = {
    "a100-sxm", "h100-sxm", "h100-pcie", "h200-sxm", "b200", "gb200", "b300", "gb300", "l40s", "l4",
    "mi250x", "mi300x", "mi325x", "mi350x", "mi355x", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-v7",
    "gaudi2", "gaudi3", "trn1", "inf2", "trn2", "trn3",
}


def test_every_researched_chip_is_present() -> None:
    assert EXPECTED_IDS <= set(CHIPS)


@pytest.mark.parametrize("chip", CHIPS.values(), ids=list(CHIPS))
def test_entry_complete_and_plausible(chip) -> None:
    assert chip.source_url.startswith("https://") and chip.source_title
    assert chip.scope in ("chip", "core")
    p = chip.peak_tflops
    assert set(p) <= set(PEAK_DTYPES)
    assert "bf16" in p, "every accelerator has a bf16 figure"
    # dense ordering: a sparse figure passed as dense would break these
    if "fp32" in p:
        assert p["fp32"] <= p["bf16"]
    if "tf32" in p:
        assert p["tf32"] <= p["bf16"]
    if "fp16" in p:
        assert p["fp16"] == p["bf16"]
    if "fp8" in p:
        assert p["bf16"] <= p["fp8"] <= 2.05 * p["bf16"]  # vendor figures are rounded
    for fp4 in ("mxfp4", "nvfp4"):
        if fp4 in p:
            assert p.get("fp8", p.get("mxfp8", p["bf16"])) <= p[fp4]
    if "mxfp8" in p:
        assert p["bf16"] <= p["mxfp8"] <= 4.1 * p["bf16"]  # Trainium3's MXFP8 runs at 4x its bf16
    assert 0.1 <= chip.memory_bandwidth_tbs <= 20
    assert 8 <= chip.memory_gb <= 512 or chip.scope == "core"
    assert 10 <= p["bf16"] <= 20_000
    if chip.source_kind != "vendor":
        assert chip.vendor_url or chip.source_kind == "derived"


def test_core_entries_are_derived_from_their_chip() -> None:
    assert CHIPS["trn2-lnc2"].peak_tflops["bf16"] * 4 == pytest.approx(CHIPS["trn2"].peak_tflops["bf16"])
    assert CHIPS["trn2-lnc1"].peak_tflops["bf16"] * 8 == pytest.approx(CHIPS["trn2"].peak_tflops["bf16"])
    assert CHIPS["trn1-nc"].peak_tflops["bf16"] * 2 == pytest.approx(CHIPS["trn1"].peak_tflops["bf16"])


@pytest.mark.parametrize("reported,chip_id", [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA H200", "h200-sxm"),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm"),
    ("NVIDIA B200", "b200"),
    ("NVIDIA GB200", "gb200"),
    ("NVIDIA GB300", "gb300"),
    ("NVIDIA L4", "l4"),
    ("NVIDIA L40S", "l40s"),
    ("AMD Instinct MI300X", "mi300x"),
    ("AMD Instinct MI355X", "mi355x"),
    ("AMD Instinct MI350X", "mi350x"),
    ("NC_v2", "trn1-nc"),
    ("NC_v3", "trn2-lnc1"),
    ("NC_v3d", "trn2-lnc2"),
    ("trn3", "trn3"),
    ("NVIDIA H200 NVL", "h200-nvl"),
    ("NVIDIA H100 NVL", "h100-nvl"),
    ("AMD Instinct MI325X", "mi325x"),
    ("AMD Instinct MI300X VF", "mi300x"),
    ("NVIDIA A100-SXM4-40GB", "a100-sxm"),
    ("TPU v5", "tpu-v5p"),
    ("TPU v5e", "tpu-v5e"),
    ("TPU7x", "tpu-v7"),
])
def test_lookup_from_framework_names(reported: str, chip_id: str) -> None:
    assert find_chip(reported, CHIPS).id == chip_id


@pytest.mark.parametrize("reported", [
    "NVIDIA GH200 480GB",  # mamf-finder log of stas00/ml-engineering PR #60 (tests/data/import)
    "NVIDIA GH200 144G HBM3e",
    "gfx942", "gfx950",  # ROCm targets: each is two products, the importers map them with a warning
    "gfx942:sramecc+:xnack-",
    "NVIDIA L40",  # "l4" must not match inside "l40"
])
def test_match_strings_are_whole_tokens(reported: str) -> None:
    """A match string touching a letter or digit is not a match: "h200" is not in "GH200"."""
    assert find_chip(reported, CHIPS) is None


def test_unknown_name_maps_to_nothing() -> None:
    assert find_chip("Some Future Chip 9000", CHIPS) is None
    with pytest.raises(SpecError, match="'nope'"):
        get_chip("nope", CHIPS)


def test_spec_file_adds_and_replaces(tmp_path) -> None:
    f = tmp_path / "mine.toml"
    f.write_text(
        '[[chip]]\nid = "h100-sxm"\nname = "tuned"\nscope = "chip"\npeak_tflops = { bf16 = 800.0 }\n'
        'memory_gb = 80.0\nmemory_bandwidth_tbs = 3.0\nsource_title = "my lab"\nsource_url = "https://example.org"\n'
    )
    chips = load_chips(f)
    assert chips["h100-sxm"].peak_tflops == {"bf16": 800.0}
    assert "b200" in chips


@pytest.mark.parametrize("text,fragment", [
    ("not toml [", "not valid TOML"),
    ("x = 1", "no [[chip]]"),
    ('[[chip]]\nid = "a"', "lacks field"),
    ('[[chip]]\nid="a"\nname="a"\nscope="rack"\npeak_tflops={bf16=1.0}\nmemory_gb=1.0\nmemory_bandwidth_tbs=1.0\n'
     'source_title="t"\nsource_url="u"', "scope='rack'"),
    ('[[chip]]\nid="a"\nname="a"\nscope="chip"\npeak_tflops={bf16=-1.0}\nmemory_gb=1.0\nmemory_bandwidth_tbs=1.0\n'
     'source_title="t"\nsource_url="u"', "peak_tflops.bf16=-1.0"),
    ('[[chip]]\nid="a"\nname="a"\nscope="chip"\npeak_tflops={int4=1.0}\nmemory_gb=1.0\nmemory_bandwidth_tbs=1.0\n'
     'source_title="t"\nsource_url="u"', "unknown dtype 'int4'"),
])
def test_spec_errors_name_field(text: str, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_chips(text)
    assert fragment in str(info.value)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_spec_loader_never_tracebacks(text: str) -> None:
    try:
        parse_chips(text)
    except SpecError as exc:
        assert str(exc)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["id", "name", "scope", "peak_tflops", "memory_gb", "memory_bandwidth_tbs",
                                        "source_title", "source_url", "match", "notes"]),
                       st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=8),
                                 st.lists(st.text(max_size=3), max_size=2),
                                 st.dictionaries(st.text(max_size=5), st.floats(), max_size=2))))
def test_chip_table_fuzz(entry: dict) -> None:
    from mfu_sweep.specs import parse_chip

    try:
        parse_chip(entry)
    except SpecError:
        pass


def test_cpu_flop_per_cycle_table() -> None:
    assert fp32_flop_per_cycle(frozenset({"avx512f", "avx2", "fma"}))[0] == 64
    assert fp32_flop_per_cycle(frozenset({"avx2", "fma"}))[0] == 32
    assert half_flop_per_cycle(frozenset({"amx_bf16", "avx512_bf16"}), "amx_bf16", "avx512_bf16")[0] == 1024
    assert half_flop_per_cycle(frozenset({"avx2"}), "amx_bf16", "avx512_bf16") is None


def test_cpu_estimate_is_labelled(tmp_path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("model name\t: Test CPU\ncpu MHz\t\t: 2000.000\nflags\t\t: fpu avx avx2 fma amx_bf16\n")
    peak = estimate_cpu_peak(threads=2, cpuinfo=str(info))
    assert peak.estimated and peak.chip == "cpu"
    assert "estimated" in peak.source and "AMX" in peak.source
    assert peak.tflops["bf16"] >= peak.tflops["fp32"]


def test_override_recorded() -> None:
    peak = Peak.from_chip(CHIPS["h100-sxm"])
    new = apply_peak_override(peak, 700.0, ["bf16"])
    assert new.override and new.tflops["bf16"] == 700.0 and new.tflops["fp32"] == 67.0
    assert new.overrides["peak_tflops"] == 700.0 and "override" in new.source
    with pytest.raises(SpecError, match="--peak-tflops"):
        apply_peak_override(peak, -1.0, ["bf16"])
