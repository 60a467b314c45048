"""CPU peaks by microarchitecture, from /proc/cpuinfo texts (tests/cpuinfo_texts.py), not from this machine."""

from __future__ import annotations

import pytest
from cpuinfo_texts import (
    SAPPHIRE_RAPIDS,
    SKYLAKE_GOLD_5122,
    SKYLAKE_SILVER,
    SKYLAKE_SP,
    UNKNOWN,
    ZEN2,
    ZEN3,
    ZEN4,
    ZEN4_NO_AVX512,
    ZEN5,
)

from mfu_sweep.specs.cpu import (
    citations,
    estimate_cpu_peak,
    find_uarch,
    flop_per_cycle,
    load_uarchs,
    parse_cpuinfo,
    physical_cores,
)


@pytest.mark.parametrize("text,uarch,fp32,bf16", [
    (ZEN2, "zen2", 32, 32),
    (ZEN3, "zen3", 32, 32),
    (ZEN4, "zen4", 32, 64),            # AVX-512 on two 256-bit pipes
    (ZEN4_NO_AVX512, "zen4", 32, 32),  # a VM hiding AVX-512: same fp32 rate, no bf16 unit
    (ZEN5, "zen5", 64, 128),
    (SKYLAKE_SP, "skylake-sp", 64, 64),
    (SKYLAKE_SILVER, "skylake-sp-1fma", 32, 32),
    (SKYLAKE_GOLD_5122, "skylake-sp", 64, 64),
    (SAPPHIRE_RAPIDS, "sapphire-rapids", 64, 1024),
])
def test_rates_by_microarchitecture(text: str, uarch: str, fp32: int, bf16: int) -> None:
    info = parse_cpuinfo(text)
    rates = flop_per_cycle(info)
    assert rates.uarch is not None and rates.uarch.id == uarch
    assert rates.per_cycle["fp32"] == fp32 and rates.per_cycle["bf16"] == bf16
    assert f"row {uarch!r}" in rates.rule


def test_sapphire_rapids_fp16_uses_avx512_fp16() -> None:
    assert flop_per_cycle(parse_cpuinfo(SAPPHIRE_RAPIDS)).per_cycle["fp16"] == 128


def test_unknown_part_falls_back_and_says_so() -> None:
    info = parse_cpuinfo(UNKNOWN)
    assert find_uarch(info) is None
    rates = flop_per_cycle(info)
    assert rates.uarch is None and rates.per_cycle["fp32"] == 64 and rates.per_cycle["bf16"] == 128
    peak = estimate_cpu_peak(info=info, cpus=[0, 1], clock_ghz=2.0)
    assert "no row of cpu_uarch.toml matches GenuineIntel family 6 model 254" in peak.source
    assert "fallback flag rule" in peak.source


def test_parse_identity_fields() -> None:
    info = parse_cpuinfo(ZEN4)
    assert (info.vendor, info.family, info.model_id, info.stepping) == ("AuthenticAMD", 25, 17, 1)
    assert info.model == "AMD EPYC 9R14" and "avx512_bf16" in info.flags and info.clock_ghz == 2.6


def test_smt_siblings_count_once() -> None:
    info = parse_cpuinfo(SAPPHIRE_RAPIDS)  # 4 cores x 2 threads, siblings are CPUs c and c + 4
    assert physical_cores(info, range(8)) == (4, 8)
    assert physical_cores(info, [0, 4]) == (1, 2)
    peak = estimate_cpu_peak(threads=8, info=info, cpus=range(8), clock_ghz=2.0)
    assert peak.tflops["fp32"] == pytest.approx(4 * 2.0 * 64 / 1000)
    assert "4 cores (8 threads on 4 physical cores usable)" in peak.source
    # fewer threads than cores: the threads set the count
    assert estimate_cpu_peak(threads=2, info=info, cpus=range(8), clock_ghz=2.0).tflops["fp32"] == pytest.approx(
        2 * 2.0 * 64 / 1000)


def test_zen4_peak_and_source_name_the_row() -> None:
    peak = estimate_cpu_peak(threads=2, info=parse_cpuinfo(ZEN4), cpus=[0, 1], clock_ghz=2.6)
    assert peak.tflops["fp32"] == pytest.approx(2 * 2.6 * 32 / 1000)
    assert peak.tflops["bf16"] == pytest.approx(2 * 2.6 * 64 / 1000)
    assert "row 'zen4'" in peak.source and "32 FLOP/cycle" in peak.source and peak.estimated


def test_no_topology_counts_each_cpu() -> None:
    info = parse_cpuinfo("model name\t: Bare\nflags\t\t: avx2 fma\n")
    assert physical_cores(info, [0, 1, 2]) == (3, 3)


def test_every_row_is_cited_and_plausible() -> None:
    rows = load_uarchs()
    assert len({r.id for r in rows}) == len(rows)
    for row in rows:
        assert row.source and row.vendors and row.families and row.models
        assert all(lo <= hi for lo, hi in row.models)
        for dtype, rates in row.rates.items():
            assert all(r in (16, 32, 64, 128, 1024) for r in rates.values()), (row.id, dtype)
        assert row.rates["fp32"], row.id
        assert citations(row), f"{row.id}: its source names no entry of [sources]"
