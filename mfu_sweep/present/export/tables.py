"""Tables for papers and spreadsheets: records, fits and crossovers as CSV, Markdown or LaTeX.

CSV is tidy and unrounded: one row per record (or fit, or crossover), every
number at full precision. Markdown and LaTeX are for reading: each number is
rounded to the first significant digit of its uncertainty (two digits when
that digit is 1), and shown as ``value ± u`` where ``u`` is half the width of
its 95% interval (the median's order-statistic interval for records, the
bootstrap interval for fits). LaTeX output is a ``booktabs`` ``tabular`` that
a paper can ``\\input`` inside its own ``table`` environment.
"""

from __future__ import annotations

import csv
import io
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mfu_sweep.analysis.fits.fit import RooflineFit, fit_all
from mfu_sweep.analysis.ground.series import SeriesKey, sweep_order
from mfu_sweep.analysis.verdicts.compare import SI, CompareError, Comparison, Crossover, compare_all
from mfu_sweep.present.export.escape import md_cell, md_text, plain
from mfu_sweep.present.export.steps import steps_display, steps_rows
from mfu_sweep.present.words import metric_name
from mfu_sweep.records.results import Record, Sweep
from mfu_sweep.util.stats import median_ci
from mfu_sweep.util.text import counted, format_flops

FORMATS = ("csv", "markdown", "latex")
WHATS = ("records", "fits", "crossovers", "bands", "steps")
UNCERTAINTY_NOTE = ("± is half the 95% interval; values are rounded to its first significant digit "
                    "(two digits when that digit is 1)")
LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                 # under LaTeX's default OT1 font encoding these print as ¡ ¿ — unless spelled as text symbols
                 "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}"}


@dataclass(frozen=True)
class Table:
    """A display table: header, rows of (value, uncertainty-or-None) cells, column alignment."""

    header: tuple[str, ...]
    rows: tuple[tuple[tuple[str, str | None], ...], ...]
    align: str
    notes: tuple[str, ...] = ()
    empty: str = "no rows"  # the one row shown instead of none, so an empty table says why


# -- rounding to the uncertainty -------------------------------------------------


def uncertainty_decimals(half_width: float | None) -> int | None:
    """Decimal places that keep the first significant digit of ``half_width`` (two if it is 1)."""
    if half_width is None or not math.isfinite(half_width) or half_width <= 0:
        return None
    mantissa, exponent = f"{half_width:.0e}".split("e")
    digits = 2 if int(mantissa) == 1 else 1
    return digits - 1 - int(exponent)


def _fixed(value: float, decimals: int) -> str:
    if decimals >= 0:
        return f"{value:.{decimals}f}"
    return str(int(round(value, decimals)))


def significant(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant figures, without an exponent."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    rounded = float(f"{value:.{digits - 1}e}")
    return _fixed(rounded, digits - 1 - math.floor(math.log10(abs(rounded))))


def round_to_uncertainty(value: float, half_width: float | None, digits: int = 3) -> tuple[str, str | None]:
    """``(value, half_width)`` as text rounded to the uncertainty; without one, ``digits`` significant figures.

    >>> round_to_uncertainty(123.456, 0.53)
    ('123.5', '0.5')
    >>> round_to_uncertainty(123.456, 0.13)
    ('123.46', '0.13')
    """
    dec = uncertainty_decimals(half_width)
    if dec is None:
        return significant(value, digits), None
    return _fixed(value, dec), _fixed(float(half_width), dec)


# -- tidy rows (CSV) -------------------------------------------------------------


def _interval(rec: Record) -> tuple[float, float] | None:
    if rec.ci_low_s is not None and rec.ci_high_s is not None:
        return rec.ci_low_s, rec.ci_high_s
    return median_ci(rec.samples_s) if rec.samples_s else None


def record_row(sweep: Sweep, rec: Record) -> dict[str, Any]:
    """One tidy CSV row for a record, with its series and device."""
    peak = sweep.peak.for_dtype(rec.dtype)
    return {
        "label": sweep.label, "device": sweep.device.get("name"), "backend": sweep.device.get("backend"),
        "chip": sweep.device.get("chip"), "host": sweep.run.get("host"), "run_id": sweep.run.get("id"),
        "pass": rec.run_pass, "dtype": rec.dtype, "mode": rec.mode, "family": rec.family, "shape": str(rec.shape),
        "layout": rec.shape.layout, "batch": rec.shape.batch, "m": rec.shape.m, "n": rec.shape.n, "k": rec.shape.k,
        "flops": rec.flops, "bytes": rec.bytes, "intensity": rec.intensity, "status": rec.status,
        "n_samples": len(rec.samples_s), "median_s": rec.median_s, "iqr_s": rec.iqr_s,
        "ci_low_s": rec.ci_low_s, "ci_high_s": rec.ci_high_s, "tflops": rec.tflops, "mfu": rec.mfu,
        "peak_tflops": peak, "peak_estimated": sweep.peak.estimated, "first_call_s": rec.first_call_s,
        "compile_s": rec.compile_s, "rel_error": rec.rel_error, "flags": ";".join(rec.flags), "error": rec.error,
    }


def record_rows(sweeps: Iterable[Sweep]) -> list[dict[str, Any]]:
    """Tidy rows of every record, sweeps in deterministic order, records by (dtype, mode, flops, pass)."""
    rows = []
    for sw in sorted(sweeps, key=sweep_order):
        for rec in sorted(sw.records, key=lambda r: (r.dtype, r.mode, r.flops, r.shape, r.run_pass)):
            rows.append(record_row(sw, rec))
    return rows


def _flat(data: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        if k.endswith("_ci"):
            out[f"{k[:-3]}_low"], out[f"{k[:-3]}_high"] = (v or (None, None))
        elif isinstance(v, dict):
            out.update({f"{k}_{kk}": vv for kk, vv in v.items()})
        elif isinstance(v, list):
            out[k] = "; ".join(str(x) for x in v)
        else:
            out[k] = v
    return out


def fit_rows(fits: Mapping[SeriesKey, RooflineFit]) -> list[dict[str, Any]]:
    """Tidy rows of fits: ``*_ci`` become ``*_low`` and ``*_high`` columns."""
    return [_flat(fits[k].to_json()) for k in sorted(fits)]


# The columns of a crossover row: the header of a CSV without crossovers (a table with no rows, not 0 bytes).
CROSSOVER_COLUMNS = ("a", "b", "dtype", "mode", "metric", "flops", "low_flops", "high_flops", "from", "to", "method")


def crossover_rows(comparisons: Iterable[Comparison]) -> list[dict[str, Any]]:
    """One row per crossover, with its pair."""
    return [{"a": c.a, "b": c.b, "dtype": c.dtype, "mode": c.mode, "metric": c.metric, **_crossover_row(x)}
            for c in comparisons for x in c.crossovers]


def _crossover_row(x: Crossover) -> dict[str, Any]:
    """A crossover as one row: the fits merged into its change of leader as ``fit_flops`` ("4.2e+09; 2.5e+10",
    empty when the fits do not cross there, None when no fits were compared)."""
    row = x.to_json()
    fits = row.pop("fits", None)
    return {**row, "fit_flops": None if fits is None else "; ".join(f"{f['flops']:.4g}" for f in fits)}


def band_rows(comparisons: Iterable[Comparison]) -> list[dict[str, Any]]:
    """One row per FLOP band of every pair: its verdict (a, b, same, ambiguous), the measured shapes of each side
    it used, ratio and interval, p-values, and the run of bands whose claim it carries (``via``)."""
    out = []
    for c in comparisons:
        for band in c.bands:
            j = band.to_json(c.a, c.b)
            via = j.pop("via") or {}
            split = j.pop("evidence_split", None) or {}  # one column per number, never a dict in a cell
            j.update({f"evidence_split_{k}": v for k, v in split.items()})
            out.append({"a": c.a, "b": c.b, "dtype": c.dtype, "mode": c.mode, "metric": c.metric, **j,
                        "via_low_flops": via.get("low_flops"), "via_high_flops": via.get("high_flops"),
                        "via_p_adjusted": via.get("p_adjusted")})
    return out


def bands_table(comparisons: Iterable[Comparison]) -> Table:
    """One row per band: pair, metric, band, shapes used (matched) of those measured, ratio [interval], verdict.

    The verdict is the band's own (:meth:`~mfu_sweep.analysis.verdicts.bands.Band.call`) in the words of the
    metric: by MFU a lead is "higher MFU" (closer to its own peak), never "faster".
    """
    rows = []
    for c in comparisons:
        for band in c.bands:
            j = band.to_json(c.a, c.b)
            lo, hi = j["ratio_low"], j["ratio_high"]
            half = (hi - lo) / 2 if lo is not None and hi is not None else None
            via = f" (over {format_flops(band.via[0])}-{format_flops(band.via[1])})" if band.via else ""
            rows.append(((c.a, None), (c.b, None), (c.dtype, None), (c.mode, None), (metric_name(c.metric), None),
                         (f"{format_flops(band.low_flops)}-{format_flops(band.high_flops)}", None),
                         (f"{band.n} ({j['matched']}) of {j['measured_a']}/{j['measured_b']}", None),
                         _cell(j["ratio"], half), (band.call(c.a, c.b) + via, None)))
    header = ("A", "B", "dtype", "mode", "Metric", "FLOP band", "Shapes used (matched) of measured A/B", "A/B",
              "Verdict")
    notes = ("verdicts: a lead beyond the margin (by MFU: closer to its own peak, each device against its own "
             "peak, not faster; by TFLOP/s: faster), the same within it (two one-sided tests), else ambiguous; "
             "Holm over the bands and runs of adjacent bands; A/B +- half the band's Holm-adjusted interval (its "
             "test at its Holm level: a lead lies wholly past the margin); 'ambiguous alone; ... taken together "
             "(over X-Y)': the band is part of a run of adjacent bands whose conclusion it does not reach alone",)
    return Table(header=header, rows=tuple(rows), align="lllllllrl", notes=notes)


def csv_columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The header of ``rows``: every key of any row, in the order keys first appear (row by row).

    Rows of one kind need not share their keys (a fit bounded by a plausible bandwidth range has
    ``bandwidth_range_*`` columns, an unbounded one none); a row without a column gets an empty cell.
    """
    return list(dict.fromkeys(k for r in rows for k in r))


def to_csv(rows: Sequence[Mapping[str, Any]], empty: Sequence[str] = ()) -> str:
    """Rows as CSV with a header: the union of the rows' keys (:func:`csv_columns`; ``empty`` when there are no
    rows, so a table without rows still has its header), empty cells for None, text neutralised against
    formulas (:func:`csv_cell`)."""
    buf = io.StringIO()
    columns = csv_columns(rows) if rows else list(empty)
    if columns:
        writer = csv.DictWriter(buf, fieldnames=[csv_cell(k) for k in columns], lineterminator="\n",
                                restval="")
        writer.writeheader()
        writer.writerows({csv_cell(k): csv_cell(v) for k, v in r.items()} for r in rows)
    return buf.getvalue()


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet reads as the start of a formula (OWASP)
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def csv_cell(value: Any) -> Any:
    """One CSV value: None as an empty cell; text that a spreadsheet would run as a formula (``=HYPERLINK(...)``,
    ``+cmd``, ``@SUM``, a leading tab or CR) behind a ``'``, as OWASP's CSV-injection advice says.

    Numbers stay numbers: a float or int is written as it is, and so is text that is a plain number
    (``-0.05``, ``1e-3``), so negative values are never mangled.
    """
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


# -- display tables ----------------------------------------------------------------


def _cell(value: float | None, half_width: float | None = None, digits: int = 3) -> tuple[str, str | None]:
    if value is None or not math.isfinite(value):
        return "--", None
    return round_to_uncertainty(value, half_width, digits)


ABOVE_PEAK_NOTE = ("above peak: MFU over 100%, so the peak is too low for this run (flag above_peak; kept, "
                   "not clipped)")


def _record_cells(sweep: Sweep, rec: Record) -> tuple[tuple[str, str | None], ...]:
    status = f"{rec.status}, above peak" if "above_peak" in rec.flags else rec.status
    text = [(sweep.label, None), (rec.dtype, None), (rec.mode, None), (str(rec.shape), None),
            (str(rec.run_pass), None),
            _cell(rec.flops / 1e9), _cell(rec.intensity), (status, None)]
    iv = _interval(rec) if rec.ok else None
    if rec.median_s is None or iv is None:
        return tuple(text + [("--", None)] * 3)
    lo, hi = iv
    tf_lo, tf_hi = rec.flops / hi / 1e12, rec.flops / lo / 1e12
    peak = sweep.peak.for_dtype(rec.dtype)
    mfu = (rec.flops / rec.median_s / 1e12 / peak * 100) if peak else None
    return tuple(text + [
        _cell(rec.median_s * 1e6, (hi - lo) / 2 * 1e6),
        _cell(rec.flops / rec.median_s / 1e12, (tf_hi - tf_lo) / 2),
        _cell(mfu, (tf_hi - tf_lo) / 2 / peak * 100 if peak else None),
    ])


def records_table(sweeps: Iterable[Sweep]) -> Table:
    """Per record: series, shape, pass, GFLOP, intensity, status, time, TFLOP/s and MFU with uncertainties.

    The passes of a ``--repeats`` sweep are one row each (``Pass``: 0, 1 ...; 0 for a file without
    passes); a record above the peak says so in ``Status``.
    """
    sweeps = sorted(sweeps, key=sweep_order)
    rows = [_record_cells(sw, rec) for sw in sweeps
            for rec in sorted(sw.records, key=lambda r: (r.dtype, r.mode, r.flops, r.shape, r.run_pass))]
    header = ("Device", "dtype", "mode", "Shape", "Pass", "GFLOP", "FLOP/B", "Status", "Time (µs)", "TFLOP/s",
              "MFU (%)")
    above = any("above_peak" in r.flags for sw in sweeps for r in sw.records)
    return Table(header=header, rows=tuple(rows), align="llllrrrlrrr",
                 notes=(UNCERTAINTY_NOTE, *([ABOVE_PEAK_NOTE] if above else [])), empty="no records")


def _ci_cell(value: float | None, ci: Sequence[float] | None, constrained: bool = True) -> tuple[str, str | None]:
    if not constrained:
        return "n/c", None
    return _cell(value, (ci[1] - ci[0]) / 2 if ci else None)


def _scaled(ci: Sequence[float], scale: float) -> tuple[float, float]:
    return ci[0] * scale, ci[1] * scale


def _fit_cells(fit: RooflineFit) -> tuple[tuple[str, str | None], ...]:
    c = fit.constrained
    peak, bw = fit.peak_tflops, fit.peak_bandwidth_tbs
    return (
        (fit.key.label, None), (fit.key.dtype, None), (fit.key.mode, None), (fit.model, None),
        _ci_cell(fit.p_tflops, fit.p_tflops_ci, c["p_tflops"]),
        _ci_cell(fit.p_tflops / peak * 100, _scaled(fit.p_tflops_ci, 100 / peak), c["p_tflops"]) if peak
        else ("--", None),
        _ci_cell(fit.w_tbs, fit.w_tbs_ci, c["w_tbs"]),
        _ci_cell(fit.w_tbs / bw * 100, _scaled(fit.w_tbs_ci, 100 / bw), c["w_tbs"]) if bw else ("--", None),
        _ci_cell(fit.t0_s * 1e6, _scaled(fit.t0_s_ci, 1e6), c["t0_s"]),
        _cell(fit.rms_log_residual, None, 2), _cell(fit.r2_log, None, 4), (str(fit.n_shapes), None),
    )


def fits_table(fits: Mapping[SeriesKey, RooflineFit]) -> Table:
    """Per fitted series: model, P (and % of peak), W (and % of peak bandwidth), t0, fit quality."""
    header = ("Device", "dtype", "mode", "Model", "P (TFLOP/s)", "P/peak (%)", "W (TB/s)", "W/peak (%)",
              "t0 (µs)", "RMS log resid.", "R² (log)", "Shapes")
    notes = (UNCERTAINTY_NOTE + " (bootstrap over shapes and samples)",
             "n/c: not constrained by the measured shapes (no shape where this term sets the time)")
    return Table(header=header, rows=tuple(_fit_cells(fits[k]) for k in sorted(fits)), align="llllrrrrrrrr",
                 notes=notes)


def _flops_interval(x: float, lo: float, hi: float) -> str:
    """``"96 [80, 110] GFLOP"``: one SI prefix, decimals from the interval's half-width."""
    scale, prefix = next(((s, p) for s, p in SI if x >= s * 0.9995), SI[-1])
    dec = uncertainty_decimals((hi - lo) / 2 / scale)
    v, a, b = (_fixed(y / scale, dec) if dec is not None else significant(y / scale, 2) for y in (x, lo, hi))
    return f"{v} [{a}, {b}] {prefix}FLOP"


def _method_cell(x: Crossover) -> str:
    """``"shapes"``, ``"shapes; fits at 4.2 GFLOP, 25 GFLOP"`` or ``"shapes; the fits do not cross there"``."""
    if x.fits is None:
        return x.method
    if not x.fits:
        return f"{x.method}; the fits do not cross there"
    return f"{x.method}; fits at {', '.join(format_flops(f) for f, _, _ in x.fits)}"


NO_CROSSOVER = "no crossover: no compared pair changes leader over its shared FLOP range"


def crossovers_table(comparisons: Iterable[Comparison]) -> Table:
    """One row per crossover: pair, dtype, mode, metric, direction, FLOPs [interval], method."""
    rows = [((c.a, None), (c.b, None), (c.dtype, None), (c.mode, None), (c.metric, None),
             (f"{x.from_label} -> {x.to_label}", None), (_flops_interval(x.flops, x.low_flops, x.high_flops), None),
             (_method_cell(x), None))
            for c in comparisons for x in c.crossovers]
    header = ("A", "B", "dtype", "mode", "Metric", "Leader change", "FLOPs [interval]", "Method")
    notes = ("one row per change of leader. data: between the median FLOPs of the last band where the old leader "
             "leads beyond the margin and the first where the new one does, narrowed by Fieller's interval of the "
             "shapes' zero crossing; fits: where the fitted curves cross within that change (the fits' simultaneous "
             "95% band), a second estimate, never a row of its own",)
    return Table(header=header, rows=tuple(rows), align="llllllll", notes=notes if rows else (NO_CROSSOVER,),
                 empty=NO_CROSSOVER)


def _with(table: Table, skipped: Sequence[str]) -> Table:
    """``table`` with a note per pair that could not be compared."""
    return replace(table, notes=(*table.notes, *(f"not compared: {n}" for n in skipped)))


# -- rendering ---------------------------------------------------------------------


def latex_escape(text: str) -> str:
    """Escape LaTeX special characters in plain text, on one line (a blank line would end the tabular's row)."""
    return "".join(LATEX_SPECIAL.get(ch, ch) for ch in plain(text))


def _latex_cell(value: str, unc: str | None) -> str:
    if unc is not None:
        return f"${value} \\pm {unc}$"
    text = latex_escape(value).replace(r" -\textgreater{} ", r" $\to$ ").replace("--", "{--}")
    return text.replace("²", r"\textsuperscript{2}").replace("µ", r"\textmu{}")


def to_latex(table: Table) -> str:
    """A booktabs ``tabular`` (needs ``\\usepackage{booktabs}``), ready to ``\\input``."""
    head = " & ".join(_latex_cell(h, None) for h in table.header)
    lines = ["% Generated by mfu-sweep export; needs \\usepackage{booktabs}."]
    lines += [f"% {n}" for n in table.notes]
    lines += [f"\\begin{{tabular}}{{{table.align}}}", r"\toprule", head + r" \\", r"\midrule"]
    lines += [" & ".join(_latex_cell(v, u) for v, u in row) + r" \\" for row in table.rows]
    if not table.rows:
        lines.append(f"\\multicolumn{{{len(table.header)}}}{{l}}{{{latex_escape(table.empty)}}} \\\\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def to_markdown(table: Table) -> str:
    """A GitHub-flavoured Markdown table, notes below it; every text escaped as the report's
    (:func:`mfu_sweep.present.export.escape.md_cell`: no markup from a label survives)."""
    def cell(v: str, u: str | None) -> str:
        return md_cell(f"{v} ± {u}" if u is not None else v)

    sep = ["---:" if a == "r" else ":---" for a in table.align]
    lines = ["| " + " | ".join(md_cell(h) for h in table.header) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(cell(v, u) for v, u in row) + " |" for row in table.rows]
    if not table.rows:
        lines.append("| " + " | ".join([cell(table.empty, None)] + [""] * (len(table.header) - 1)) + " |")
    lines += ([""] + [f"_{md_text(n)}_" for n in table.notes]) if table.notes else []
    return "\n".join(lines) + "\n"


def _note_on_stderr(note: str) -> None:
    sys.stderr.write(f"note: {note}\n")


def _compared(sweeps: Sequence[Sweep], metric: str, on_skip: Callable[[str], None] | None = None,
             **kw: Any) -> tuple[list[Comparison], tuple[str, ...]]:
    """Every pair of ``sweeps`` that can be compared, and a note per pair that cannot (no peak for MFU, no shape
    either side can be compared at), each also handed to ``on_skip`` [a ``note:`` line on stderr].

    Raises :class:`~mfu_sweep.analysis.verdicts.compare.CompareError` when no pair can be compared (for want of
    shared shapes or of peaks, or any reason :func:`~mfu_sweep.analysis.verdicts.compare.compare_all` gives)."""
    notes: list[str] = []
    comps = compare_all(sweeps, metric, on_skip=lambda exc: notes.append(str(exc)), **kw)
    if notes and not comps:
        raise CompareError(f"nothing to compare: {counted(len(notes), 'pair')} skipped (first: {notes[0]})")
    for note in notes:
        (on_skip or _note_on_stderr)(note)
    return comps, tuple(notes)


def export_table(sweeps: Sequence[Sweep], what: str = "records", fmt: str = "csv", *, metric: str = "mfu",
                 on_skip: Callable[[str], None] | None = None, **kw: Any) -> str:
    """Render ``what`` (records, fits, crossovers, bands or steps) of ``sweeps`` as ``fmt`` (csv, markdown or latex).

    ``steps`` is time to N steps of every model family in the records (:mod:`mfu_sweep.present.export.steps`).
    Keyword arguments go to :func:`mfu_sweep.analysis.fits.fit.fit_all` (fits) or
    :func:`mfu_sweep.analysis.verdicts.compare.compare_all` (crossovers, bands: e.g. ``margin``).
    Crossovers and bands are of the pairs that can be compared; each pair that cannot is
    a note below a Markdown or LaTeX table, and goes to ``on_skip`` [a ``note:`` line on stderr: a CSV file
    has no place for it].
    """
    if what not in WHATS:
        raise ValueError(f"what={what!r} must be one of {', '.join(WHATS)}")
    if fmt not in FORMATS:
        raise ValueError(f"format={fmt!r} must be one of {', '.join(FORMATS)}")
    if what == "records":
        kw.pop("seed", None)
        if kw:
            raise TypeError(f"unexpected arguments for records: {', '.join(kw)}")
        rows, table = (record_rows(sweeps), None) if fmt == "csv" else ([], records_table(sweeps))
    elif what == "fits":
        fits = fit_all(sweeps, **kw)
        rows, table = (fit_rows(fits), None) if fmt == "csv" else ([], fits_table(fits))
    elif what == "steps":
        rows, table = (steps_rows(sweeps, **kw), None) if fmt == "csv" else ([], Table(*steps_display(sweeps, **kw)))
    elif what == "crossovers":
        comps, skipped = _compared(sweeps, metric, on_skip, **kw)
        rows, table = (crossover_rows(comps), None) if fmt == "csv" else ([], _with(crossovers_table(comps), skipped))
    else:
        comps, skipped = _compared(sweeps, metric, on_skip, **{"use_fit": False, **kw})
        rows, table = (band_rows(comps), None) if fmt == "csv" else ([], _with(bands_table(comps), skipped))
    if table is None:
        return to_csv(rows, CROSSOVER_COLUMNS if what == "crossovers" else ())
    return to_latex(table) if fmt == "latex" else to_markdown(table)
