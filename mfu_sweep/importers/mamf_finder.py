"""Text logs of mamf-finder (stas00/ml-engineering ``compute/accelerator/benchmarks/mamf-finder.py``).

The format follows the script's print statements (benchmark version 2): a
header with ``** Dtype: torch.bfloat16``, ``** Platform/Device info:`` (the
second ``- `` line is ``torch.cuda.get_device_properties``, e.g.
``_CudaDeviceProperties(name='NVIDIA H100 80GB HBM3', ...)``), ``** Critical
software versions:``, then one progress line per shape, written with
``end="\\r"`` so a log holds them separated by carriage returns::

     12 |  700.1(mean)  702.3(median)  710.9(max) @ 4096x4096x4096       | best: ...

How it was measured: per shape 50 warm-up + 100 timed ``torch.mm`` calls (the
defaults; the logged command line may change them), each between a CUDA/HIP
event pair, with a 256 MiB buffer zeroed and the output re-randomised before
each call; TFLOP/s of the mean, the median and the minimum time, printed with
one decimal. This reader takes the *median* and turns it back into seconds, so
values are flagged ``rounded_source`` (0.1 TFLOP/s resolution).
"""

from __future__ import annotations

import re
from pathlib import Path

from mfu_sweep.importers.common import SourceDevice, SourceError, SourceRow, read_provenance, sha256_of
from mfu_sweep.shapes import Shape, ShapeError

FORMAT = "mamf-finder"
TORCH_DTYPES = {
    "torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16",
    "torch.float8_e4m3fn": "fp8", "torch.float8_e4m3fnuz": "fp8",
}
_LINE = re.compile(
    r"^\s*(\d+)\s*\|\s*([\d.]+)\(mean\)\s+([\d.]+)\(median\)\s+([\d.]+)\(max\)\s*@\s*(\d+)x(\d+)x(\d+)\s*\|")
_ITERS = re.compile(r"--num_iterations[ =](\d+)")
_WARMUP = re.compile(r"--num_warmup_iterations[ =](\d+)")
UNKNOWN = ("clocks and power during each shape", "whether PYTORCH_TUNABLEOP_ENABLED was set (see the log header)",
           "the mean/median spread beyond the three printed numbers")


def _header(lines: list[str], tag: str) -> list[str]:
    """The ``- `` lines under ``** tag``."""
    out: list[str] = []
    for i, ln in enumerate(lines):
        if ln.strip().startswith(f"** {tag}"):
            for nxt in lines[i + 1:]:
                if nxt.startswith("- "):
                    out.append(nxt[2:].strip())
                elif nxt.strip() == "" and not out:
                    continue
                else:
                    break
            break
    return out


def read(path: Path) -> list[SourceDevice]:
    name = str(path)
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise SourceError(f"{name!r}: cannot read ({exc})") from None
    text = text.replace("\x1b[K", "")
    lines = [ln for chunk in text.split("\n") for ln in chunk.split("\r")]
    dtype_line = next((ln for ln in lines if ln.startswith("** Dtype:")), None)
    if dtype_line is None:
        raise SourceError(f"{name!r}: no '** Dtype:' header; not a mamf-finder log")
    torch_dtype = dtype_line.split(":", 1)[1].strip()
    if torch_dtype not in TORCH_DTYPES:
        raise SourceError(f"{name!r}: unknown dtype key {torch_dtype!r} (known: {', '.join(TORCH_DTYPES)})")
    dtype = TORCH_DTYPES[torch_dtype]
    platform = _header(lines, "Platform/Device info:")
    device_line = platform[1] if len(platform) > 1 else (platform[0] if platform else "")
    m = re.search(r"name='([^']*)'", device_line)
    device = m.group(1) if m else (device_line or "unknown")
    software = _header(lines, "Critical software versions:")
    command = next((lines[i + 1] for i, ln in enumerate(lines) if ln.startswith("** Command line:")
                    and i + 1 < len(lines)), "")
    iters = int(_ITERS.search(command).group(1)) if _ITERS.search(command) else 100
    warm = int(_WARMUP.search(command).group(1)) if _WARMUP.search(command) else 50
    rows: dict[Shape, SourceRow] = {}
    for i, ln in enumerate(lines):
        hit = _LINE.match(ln)
        if not hit:
            continue
        mean, median, best = (float(hit.group(j)) for j in (2, 3, 4))
        try:
            shape = Shape(1, int(hit.group(5)), int(hit.group(6)), int(hit.group(7)))
        except ShapeError as exc:
            raise SourceError(f"{name!r}: line {i + 1}: {exc}") from None
        seconds = shape.flops / (median * 1e12) if median > 0 else None
        rows[shape] = SourceRow(
            shape=shape, dtype=dtype, seconds=seconds, source_dtype=torch_dtype, flags=("rounded_source",),
            error=None if seconds else "median TFLOPS printed as 0.0 (below 0.1 TFLOP/s resolution)",
            family="mamf-finder",
            extra={"source_value": median, "source_unit": "TFLOP/s of the median (1 decimal)",
                   "source_mean_tflops": mean, "source_max_tflops": best},
        )
    if not rows:
        raise SourceError(f"{name!r}: no per-shape lines ('N | x(mean) y(median) z(max) @ MxNxK | ...')")
    notes = ["fp32 here is torch.float32 with torch's default (TF32 off for matmul)"] if dtype == "fp32" else []
    bench = next((ln for ln in _header(lines, "Additional notes:") if ln.startswith("benchmark version")), None)
    return [SourceDevice(
        key=device, name=device, rows=tuple(rows.values()), mode="eager", timer="events",
        details={"software": {"versions": software, "command": command}},
        provenance={
            "source_file": path.name, "source_sha256": sha256_of(path), **read_provenance(path),
            "tool": f"mamf-finder.py ({bench or 'benchmark version unknown'})",
            "timing_method": f"median of {iters} event-timed torch.mm calls after {warm} warm-ups, 256 MiB cache "
                             "flush and output re-randomised before each call; printed as TFLOP/s, 1 decimal",
            "device_key": device, "dtype_keys": {dtype: torch_dtype}, "notes": notes, "unknown": list(UNKNOWN),
        },
    )]
