from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mfu_sweep.gemm.dtypes import DTYPES, get_dtype
from mfu_sweep.gemm.shape_files import ShapeRow, read_shape_rows
from mfu_sweep.gemm.shapes import (
    Shape,
    ShapeError,
    check_memory,
    fits_device,
    parse_shape,
    points_for_range,
    size_align,
    square_family,
    unique_in_order,
    working_bytes,
)


def test_flops_bytes_intensity_by_hand() -> None:
    s = Shape(2, 512, 1024, 256)
    assert s.flops == 2 * 2 * 512 * 1024 * 256
    bf16 = get_dtype("bf16")
    # A: 512x256, B: 256x1024, C: 512x1024, 2 bytes each, batch 2
    expected = 2 * (512 * 256 + 256 * 1024 + 512 * 1024) * 2
    assert s.bytes(bf16) == expected
    assert s.intensity(bf16) == pytest.approx(s.flops / expected)


def test_fp8_output_is_two_bytes() -> None:
    s = Shape(1, 64, 64, 64)
    assert s.bytes(get_dtype("fp8")) == 64 * 64 * 1 * 2 + 64 * 64 * 2


@pytest.mark.parametrize("text,expected", [
    ("4096x4096x4096", Shape(1, 4096, 4096, 4096)),
    ("2x512x1024x256", Shape(2, 512, 1024, 256)),
    ("8,16,32", Shape(1, 8, 16, 32)),
    (" 1X2X3 ", Shape(1, 1, 2, 3)),
])
def test_parse_shape(text: str, expected: Shape) -> None:
    assert parse_shape(text) == expected


@pytest.mark.parametrize("text,fragment", [
    ("", "empty"),
    ("4096x4096", "MxNxK"),
    ("0x10x10", "must be positive"),
    ("-1x10x10", "'-1'"),
    ("1.5x10x10", "'1.5'"),
    ("axbxc", "'a'"),
    ("1x2x3x4x5", "MxNxK"),
    ("99999999x1x1", "exceeds"),
])
def test_parse_shape_rejects_and_names_value(text: str, fragment: str) -> None:
    with pytest.raises(ShapeError, match=".*") as info:
        parse_shape(text)
    assert fragment in str(info.value)


def test_square_family_log_spaced_and_aligned() -> None:
    shapes = square_family(1e6, 2e12, 16, align=64)
    sizes = [s.m for s in shapes]
    assert all(s % 64 == 0 for s in sizes if s >= 256)
    assert all(s % 16 == 0 for s in sizes) and any(s % 64 for s in sizes)  # finer multiples only when small
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)
    assert shapes[0].flops <= 2e6 and shapes[-1].flops > 1e12
    ratios = [b.flops / a.flops for a, b in zip(shapes[6:], shapes[7:])]
    assert max(ratios) / min(ratios) < 1.6  # roughly even in log space once rounding stops mattering


def test_square_family_small_alignment_keeps_points() -> None:
    assert len(square_family(1e3, 1e9, 10, align=1)) == 10


@pytest.mark.parametrize("args,fragment", [
    ((0, 1e9, 4), "min-flop"),
    ((1e9, 1e6, 4), "max-flop"),
    ((1e6, math.inf, 4), "max-flop"),
    ((1e6, 1e9, 0), "points"),
])
def test_square_family_rejects(args: tuple, fragment: str) -> None:
    with pytest.raises(ShapeError) as info:
        square_family(*args)
    assert fragment in str(info.value)


def test_check_memory_rejects_absurd() -> None:
    with pytest.raises(ShapeError, match="GiB"):
        check_memory(Shape(1, 2**24, 2**24, 2**24), DTYPES["fp32"])


def test_csv(tmp_path) -> None:
    f = tmp_path / "s.csv"
    f.write_text("# my shapes\nm,n,k,batch\n64,128,256,1\n32,32,32,4\n")
    assert [r.shape for r in read_shape_rows(f)] == [Shape(1, 64, 128, 256), Shape(4, 32, 32, 32)]
    f.write_text("m,n\n1,2\n")
    with pytest.raises(ShapeError, match="column 'k'"):
        [r.shape for r in read_shape_rows(f)]
    f.write_text("m,n,k\n1,2,x\n")
    with pytest.raises(ShapeError, match="line 2"):
        [r.shape for r in read_shape_rows(f)]
    with pytest.raises(ShapeError, match="no-such"):
        [r.shape for r in read_shape_rows(tmp_path / "no-such.csv")]


@pytest.mark.parametrize("text, fragment", [
    ("m,n,k\n64,64\n", "line 2: '64,64' has 2 values for the 3 columns m,n,k"),       # was read as 64x64x1
    ("m,n,k\n64,64,64,7\n", "line 2: '64,64,64,7' has 4 values for the 3 columns m,n,k"),  # 7 was dropped
    ("m,n,k,flavour\n64,64,64,x\n", "line 1: header has unknown column 'flavour'"),
    ("m,n,k,\n64,64,64,\n", "line 1: header has an empty column name"),
    ("m,n,k,m\n1,2,3,4\n", "header names column 'm' twice"),
    ("m,n,k\n64,,64\n", "line 2: column 'n' is empty in '64,,64'"),
    ("# a comment\n\nm,n,k\n8,8,8\n# another\n1,2,x\n", "line 6: column 'k' = 'x' is not a positive integer"),
    ("m,n,k,passes\n8,8,8,0\n", "line 2: passes=0"),
])
def test_malformed_shape_file_is_a_one_line_error_naming_file_line_and_value(tmp_path, text: str,
                                                                              fragment: str) -> None:
    f = tmp_path / "bad.csv"
    f.write_text(text)
    with pytest.raises(ShapeError) as err:
        read_shape_rows(f)
    assert str(err.value).startswith(f"shape file {str(f)!r}") and fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_shape_file_keeps_the_columns_shapes_csv_writes_and_empty_batch_is_one(tmp_path) -> None:
    f = tmp_path / "s.csv"
    f.write_text("batch,m,n,k,role,pass,count,layout,flops,bytes,intensity,family,passes\n"
                 ",8,16,32,qkv,fwd,3,nn,8192,1,2,llm:x,2\n")
    assert read_shape_rows(f) == [ShapeRow(Shape(1, 8, 16, 32), "llm:x", 2)]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_parse_shape_never_tracebacks(text: str) -> None:
    try:
        shape = parse_shape(text)
    except ShapeError as exc:
        assert "\n" not in str(exc)
    else:
        assert shape.flops > 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(-5, 10**9), st.text(max_size=5)), min_size=3, max_size=5))
def test_parse_joined_dims(parts: list) -> None:
    try:
        parse_shape("x".join(str(p) for p in parts))
    except ShapeError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_csv_loader_never_tracebacks(tmp_path_factory, data: bytes) -> None:
    f = tmp_path_factory.mktemp("csv") / "x.csv"
    f.write_bytes(data)
    try:
        [r.shape for r in read_shape_rows(f)]
    except ShapeError:
        pass


def test_unique_in_order_keeps_first_appearance_and_does_not_sort() -> None:
    big, small, mid = Shape(1, 512, 512, 512), Shape(1, 64, 64, 64), Shape(2, 128, 128, 128)
    assert unique_in_order([big, small, big, mid, small]) == [big, small, mid]
    assert unique_in_order(iter([])) == []


@pytest.mark.parametrize("spec", ["¹x2x3", "2x٣x4", "１x2x3"])
def test_unicode_digits_are_one_line_errors(spec: str) -> None:
    with pytest.raises(ShapeError, match="is not a positive integer"):
        parse_shape(spec)


def test_size_align_halves_only_below_four_multiples() -> None:
    assert [size_align(v, 64) for v in (80, 127, 128, 255, 256, 9000)] == [16, 16, 32, 32, 64, 64]
    assert size_align(10, 64) == 16 and size_align(100, 1) == 1 and size_align(50, 48) == 24


def _decade_windows(flops: list[float], lo: float, hi: float) -> list[int]:
    """Distinct FLOP counts in [a, 10a] for a stepped finely from lo to hi/10."""
    counts = []
    a = lo
    while a * 10 <= hi * (1 + 1e-9):
        counts.append(len({f for f in flops if a <= f <= 10 * a}))
        a *= 10 ** 0.01
    return counts


@pytest.mark.parametrize("lo,hi", [(1e6, 1e13), (1e6, 2e10), (1e7, 1e9)])
def test_four_per_decade_resolve_every_decade(lo: float, hi: float) -> None:
    points = points_for_range(lo, hi)
    flops = [s.flops for s in square_family(lo, hi, points, align=64)]
    counts = _decade_windows(flops, lo, hi)
    assert counts and min(counts) >= 3, min(counts)  # the run rule needs 2; one to spare
    assert lo / 1.45 <= flops[0] and flops[-1] <= hi * 1.45  # rounding moves a size by at most 1/8


def test_points_for_range() -> None:
    assert points_for_range(1e6, 1e13) == 29 and points_for_range(1e6, 1e6) == 2
    assert points_for_range(1e6, 1e7, per_decade=2) == 3


def test_working_bytes_and_device_fit() -> None:
    s = Shape(1, 1000, 1000, 1000)
    bf16 = DTYPES["bf16"]
    assert working_bytes(s, bf16) == s.bytes(bf16) + 4e6 + 8e6
    assert fits_device(s, bf16, None) and fits_device(s, bf16, 2 * 18e6)
    assert not fits_device(s, bf16, 2 * 18e6 - 1)
