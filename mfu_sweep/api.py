"""The Python API: the command line's answers as pandas DataFrames, for notebooks and scripts.

Every function takes result files (sweeps, merged files, imports: a path or a list of paths) and gives the numbers
the command line prints for them, from the same library code::

    from mfu_sweep import api
    api.bands(["sweeps/published/sm_100_B200.json", "sweeps/published/gfx950.json"], metric="tflops")

========================  ===========================================  ======================================
function                  one row per                                  the command line's equivalent
========================  ===========================================  ======================================
:func:`records`           record (shape, dtype, mode, pass)            ``export --what records`` (CSV)
:func:`fits`              fitted series (label, dtype, mode)           ``fit --json``
:func:`bands`             FLOP band of every compared pair             ``compare --json`` (``bands``)
:func:`crossovers`        crossover of every compared pair             ``compare --json`` (``crossovers``)
:func:`steps`             step series and N (time to N steps)          ``predict --steps ... --json``
:func:`gate`              device, dtype and mode of the leaderboards   ``compare --fail-on slower --json``
========================  ===========================================  ======================================

pandas is imported only when a function builds its table: it comes with the analysis install (seaborn needs it)
and with the ``api`` extra (``pip install 'mfu-sweep[api]'``). Columns are stable: the first ones are those the
docs list (docs/api.md), further ones may be added. What the command line prints as a ``note:`` line is in the
frame's ``attrs["notes"]``. Errors are the library's own (``ValueError`` subclasses, one line naming the field
and the value). The default metric of :func:`bands`, :func:`crossovers` and :func:`gate` is TFLOP/s (speed,
which needs no peak); ``mfu-sweep compare`` defaults to MFU.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mfu_sweep.records.results import Sweep, load_sweeps

if TYPE_CHECKING:  # pandas is imported when a table is built (pandas_module)
    import pandas as pd

__all__ = ["BAND_COLUMNS", "CROSSOVER_COLUMNS", "FIT_COLUMNS", "GATE_COLUMNS", "RECORD_COLUMNS", "STEP_COLUMNS",
           "bands", "crossovers", "fits", "gate", "load", "records", "steps"]

Paths = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]

RECORD_COLUMNS = ("label", "chip", "dtype", "mode", "layout", "batch", "m", "n", "k", "flops", "bytes", "median_s",
                  "tflops", "mfu", "status", "flags")
FIT_COLUMNS = ("label", "dtype", "mode", "model", "p_tflops", "p_tflops_low", "p_tflops_high", "w_tbs", "w_tbs_low",
               "w_tbs_high", "t0_s", "t0_s_low", "t0_s_high", "n_shapes")
BAND_COLUMNS = ("a", "b", "dtype", "mode", "low_flops", "high_flops", "ratio", "ratio_low", "ratio_high", "verdict",
                "leader", "matched", "model_based")
CROSSOVER_COLUMNS = ("a", "b", "dtype", "mode", "metric", "from_label", "to_label", "flops", "low_flops",
                     "high_flops", "method")
STEP_COLUMNS = ("label", "family", "dtype", "mode", "compile_cache", "state", "n", "time_s", "time_s_low",
                "time_s_high", "first_step_s", "steady_step_s", "compile_from_n")
GATE_COLUMNS = ("label", "dtype", "mode", "reference", "mean_ratio", "verdict", "passed")

EXTRA_HINT = "pip install 'mfu-sweep[api]'"


def pandas_module() -> Any:
    """The ``pandas`` module, or an ``ImportError`` in one line naming the extra that installs it."""
    try:
        import pandas
    except ImportError:
        raise ImportError(f"mfu_sweep.api returns pandas DataFrames and pandas is not installed: {EXTRA_HINT}"
                          ) from None
    return pandas


def _paths(paths: Paths) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    out = [os.fspath(p) for p in paths]
    if not out:
        raise ValueError("paths is empty: give one or more result files")
    return out


def load(paths: Paths, *, dtype: str | Sequence[str] | None = None, mode: str | Sequence[str] | None = None,
         exclude_contended: bool = False, allow_invalid: bool = False) -> list[Sweep]:
    """The sweeps of ``paths`` as the command line reads them: validated, then only ``dtype`` and ``mode``.

    Parameters
    ----------
    paths:
        Result files: a path or an iterable of paths.
    dtype, mode:
        Keep only these dtypes (``fp32``, ``bf16`` or a torch name such as ``bfloat16``) and modes
        (``eager``, ``compile``, or a series' mode such as ``eager-nt``); None keeps all.
    exclude_contended:
        Leave out records flagged ``contended`` (``--exclude-contended``).
    allow_invalid:
        Drop records that fail validation instead of refusing the file (``--allow-invalid``); each drop is
        a warning.
    """
    import warnings

    from mfu_sweep.records.contention import exclude_contended as without_contended
    from mfu_sweep.records.summaries import filter_sweeps

    on_invalid = (lambda note: warnings.warn(note, stacklevel=3)) if allow_invalid else None
    sweeps = load_sweeps(_paths(paths), on_invalid=on_invalid)
    dtypes, modes = _names(dtype), _names(mode)
    if dtypes or modes:
        from mfu_sweep.gemm.dtypes import canonical_dtype

        sweeps = filter_sweeps(sweeps, [canonical_dtype(d) for d in dtypes], modes)
    if exclude_contended:
        sweeps = without_contended(sweeps)[0]
        if not any(s.records for s in sweeps):
            raise ValueError("every record is flagged contended: nothing is left with exclude_contended=True")
    return sweeps


def _names(value: str | Sequence[str] | None) -> list[str]:
    return [] if value is None else [value] if isinstance(value, str) else list(value)


def _frame(rows: Sequence[Mapping[str, Any]], first: Sequence[str], notes: Sequence[str] = ()) -> pd.DataFrame:
    """A DataFrame of ``rows``: the ``first`` columns in that order (present even without rows), then the rest."""
    pd = pandas_module()
    flat = [_flatten(r) for r in rows]
    rest = [c for c in dict.fromkeys(k for r in flat for k in r) if c not in first]
    frame = pd.DataFrame(flat, columns=[*first, *rest])
    frame.attrs["notes"] = list(notes)
    return frame


def _flatten(row: Mapping[str, Any]) -> dict[str, Any]:
    """A nested mapping as ``outer_inner`` columns (a band's ``evidence_split``), one level deep."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, Mapping):
            out.update({f"{key}_{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


# -- records and fits --------------------------------------------------------------


def records(paths: Paths, **options: Any) -> pd.DataFrame:
    """One row per record: ``label, chip, dtype, mode, layout, batch, m, n, k, flops, bytes, median_s, tflops,
    mfu, status, flags`` (flags joined by ``;``), then the other columns of ``export --what records``.

    ``options`` are :func:`load`'s (``dtype``, ``mode``, ``exclude_contended``, ``allow_invalid``).
    """
    from mfu_sweep.present.export.tables import record_rows

    return _frame(record_rows(load(paths, **options)), RECORD_COLUMNS)


def fits(paths: Paths, *, model: str = "auto", n_boot: int = 200, seed: int = 0, **options: Any) -> pd.DataFrame:
    """One row per fitted series: the roofline fit of ``fit --json`` (``*_ci`` as ``*_low`` and ``*_high``).

    Columns start with ``label, dtype, mode, model, p_tflops (+ _low, _high), w_tbs (...), t0_s (...),
    n_shapes``; a series too small to fit is a note in ``attrs["notes"]``. ``options`` are :func:`load`'s.
    """
    from mfu_sweep.analysis.fits.fit import fit_groups
    from mfu_sweep.analysis.fits.physical import measured_copy_bandwidth
    from mfu_sweep.analysis.ground.series import group_series
    from mfu_sweep.analysis.sources.runs import check_pooling
    from mfu_sweep.present.export.tables import fit_rows

    sweeps = load(paths, **options)
    check_pooling(sweeps)
    found, skipped = fit_groups(group_series(sweeps), model=model, n_boot=n_boot, seed=seed,
                                copy_bandwidth=measured_copy_bandwidth(sweeps))
    rows = [{"label": k.label, **r} for k, r in zip(sorted(found), fit_rows(found), strict=True)]
    return _frame(rows, FIT_COLUMNS, notes=list(skipped.values()))


# -- comparisons -------------------------------------------------------------------


def _comparisons(paths: Paths, metric: str, margin: float, use_fit: bool, options: dict[str, Any]
                 ) -> tuple[list[Any], list[str]]:
    """``compare``'s pairs (``a``/``b`` select them) and its notes (pairs skipped, contention)."""
    from mfu_sweep.analysis.sources.runs import check_pooling, pick_runs
    from mfu_sweep.analysis.verdicts.compare import compare_all
    from mfu_sweep.records.contention import contention_reason

    a, b = options.pop("a", None), options.pop("b", None)
    compare_kw = {k: options.pop(k) for k in ("alpha", "min_run", "seed", "fit_n_boot") if k in options}
    sweeps, a, b = pick_runs(load(paths, **options), a, b, _paths(paths))
    check_pooling(sweeps)
    skipped: list[str] = []
    comps = compare_all(sweeps, metric, a, b, margin=margin, use_fit=use_fit,
                        on_no_peak=lambda exc: skipped.append(str(exc)), **compare_kw)
    contention = [r for r in (contention_reason(sweeps, c.a, c.b) for c in comps) if r]
    return comps, skipped + contention


def bands(paths: Paths, metric: str = "tflops", margin: float = 0.02, **options: Any) -> pd.DataFrame:
    """One row per FLOP band of every compared pair: ``compare``'s verdict per band.

    Columns start with ``a, b, dtype, mode, low_flops, high_flops, ratio, ratio_low, ratio_high, verdict, leader,
    matched, model_based`` (``verdict``: ``a``, ``b``, ``same`` or ``ambiguous``; ``leader`` the label ahead or
    None; ``matched``: points that are one shape both sides measured; ``model_based``: a shape one side measured
    against the other side's prediction there), then every other field of the band in ``compare --json``.

    Parameters
    ----------
    paths:
        Result files.
    metric:
        ``"tflops"`` (speed) or ``"mfu"`` (each device against its own peak; ``compare``'s default).
    margin:
        The practical-equivalence margin (0.02: 2%).
    **options:
        ``a``, ``b`` (labels or ``[FILE:]LABEL[/DTYPE[/MODE]]`` selectors, as ``--a``/``--b``), ``alpha``,
        ``min_run``, ``seed``, and :func:`load`'s ``dtype``, ``mode``, ``exclude_contended``, ``allow_invalid``.
    """
    from mfu_sweep.present.export.tables import band_rows

    comps, notes = _comparisons(paths, metric, margin, False, dict(options))
    rows = [{**r, "model_based": r["n_shapes"] - r["matched"]} for r in band_rows(comps)]
    return _frame(rows, BAND_COLUMNS, notes)


def crossovers(paths: Paths, metric: str = "tflops", margin: float = 0.02, **options: Any) -> pd.DataFrame:
    """One row per change of leader of every compared pair: ``a, b, dtype, mode, metric, from_label, to_label, flops,
    low_flops, high_flops, method`` (``shapes`` or ``runs``: from the band verdicts) and ``fit_flops`` (where the
    fitted curves cross within that change: its second estimate; empty where they do not, None without fits).

    Options as :func:`bands`, and ``fit_n_boot`` (bootstrap resamples of each fit, 200).
    """
    from mfu_sweep.present.export.tables import crossover_rows

    comps, notes = _comparisons(paths, metric, margin, True, dict(options))
    rows = [{("from_label" if k == "from" else "to_label" if k == "to" else k): v for k, v in r.items()}
            for r in crossover_rows(comps)]
    return _frame(rows, CROSSOVER_COLUMNS, notes)


# -- time to N steps ---------------------------------------------------------------


def steps(paths: Paths, steps: int | str | Iterable[int | str] | None = None, *, model: str | None = None,
          dtype: str | None = None, mode: str | None = None, n_boot: int = 2000, seed: int = 0,
          **options: Any) -> pd.DataFrame:
    """Time to N steps per series (label, dtype, mode, compile cache): one row per series and N.

    Parameters
    ----------
    paths:
        Result files holding a model family's shapes (``sweep --shapes llm:...``).
    steps:
        The step counts N: an int, ``"1,100,10000"``, ``"1-100000"`` (1-2-5 steps) or a list of them; None:
        decades up to ten times the largest crossing (``predict --steps``'s counts).
    model:
        A model family (``llm:qwen3-32b:tokens=8192``) or model id as ``predict --model`` takes; None: every
        ``llm:`` family the records hold.
    dtype, mode:
        Only this dtype's records (None: every dtype of the family) and this mode (None: both).
    n_boot, seed:
        Bootstrap draws over the passes and their seed.
    **options:
        :func:`load`'s ``exclude_contended`` and ``allow_invalid``.

    Columns start with ``label, family, dtype, mode, compile_cache, state, n, time_s, time_s_low, time_s_high,
    first_step_s, steady_step_s, compile_from_n`` (intervals as ``*_low``/``*_high``); a series that did not
    finish has one row without N, its reason in ``why``.
    """
    from mfu_sweep.analysis.steps.counts import parse_steps
    from mfu_sweep.analysis.steps.time_to_n import predict_steps
    from mfu_sweep.present.export.steps import result_rows

    sweeps = load(paths, **options)
    counts = None if steps is None else parse_steps([str(s) for s in ([steps] if isinstance(steps, (int, str))
                                                                      else steps)])
    results = [predict_steps(sweeps, gemms, dtype=d, modes=None if mode is None else (mode,), steps=counts,
                             n_boot=n_boot, seed=seed) for d, gemms in _workloads(sweeps, model, dtype)]
    return _frame(result_rows(results), STEP_COLUMNS, [n for r in results for n in r.notes])


def _workloads(sweeps: Sequence[Sweep], model: str | None, dtype: str | None) -> list[tuple[str, Any]]:
    """(dtype, GEMMs) of ``model`` (in ``dtype``, or each dtype its records hold), or of every family held."""
    from mfu_sweep.gemm.dtypes import canonical_dtype
    from mfu_sweep.gemm.workloads import resolve_family
    from mfu_sweep.present.export.steps import NO_FAMILY, family_workloads

    want = None if dtype is None else canonical_dtype(dtype)
    if model is None:
        found = [(d, gemms) for _, d, gemms in family_workloads(sweeps) if want in (None, d)]
        if not found:
            raise ValueError(NO_FAMILY + (f" in {want}" if want else ""))
        return found
    gemms = resolve_family(model if model.startswith("llm:") else f"llm:{model}")
    family = gemms[0].family
    held = list(dict.fromkeys(r.dtype for sw in sweeps for r in sw.records if r.family == family))
    return [(d, gemms) for d in ([want] if want else held or ["bf16"])]


# -- the gate ----------------------------------------------------------------------


def gate(paths: Paths, fail_on: str = "slower", metric: str = "tflops", margin: float = 0.02,
         baseline: str | None = None, **options: Any) -> tuple[bool, pd.DataFrame]:
    """``compare --fail-on``: whether every device passes, and one row per device, dtype and mode ranked.

    The devices are ranked against the rest (a replicate run's ``.r<rank>`` labels, or more than 4 devices of one
    dtype and mode) or against ``baseline``; a device fails when it is behind its reference by more than
    ``margin`` (``fail_on="slower"``), or also where a band cannot show it within the margin
    (``fail_on="ambiguous"``). Columns: ``label, dtype, mode, reference, mean_ratio, verdict, passed``
    (``verdict``: ``pass``, ``slower`` or ``ambiguous``); ``attrs["line"]`` is the gate's one line.

    Options: ``alpha``, ``min_run`` and :func:`load`'s. Raises
    :class:`~mfu_sweep.analysis.fleet.gate.GateError` when there is nothing to rank.
    """
    from mfu_sweep.analysis.fleet.gate import device_failure, fleets_and_boards
    from mfu_sweep.analysis.fleet.gate import gate as judge
    from mfu_sweep.analysis.fleet.leaderboard import many_devices, ranking_settings
    from mfu_sweep.analysis.ground.series import group_series
    from mfu_sweep.analysis.sources.runs import check_pooling

    settings = ranking_settings(margin=margin, **{k: options.pop(k) for k in ("alpha", "min_run") if k in options})
    sweeps = load(paths, **options)
    check_pooling(sweeps)
    series = group_series(sweeps)
    skipped: list[str] = []
    fleets, boards, notes = fleets_and_boards(series, metric, baseline, baseline is not None or many_devices(series),
                                              skipped, settings)
    verdict = judge(fleets, boards, fail_on)
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for board in [f.board for f in fleets] + list(boards):
        for label in board.devices:
            reason = device_failure(board, label, fail_on)
            key = (label, board.dtype, board.mode)
            if key not in rows or (reason and rows[key]["verdict"] != "slower"):
                rows[key] = {"label": label, "dtype": board.dtype, "mode": board.mode, "reference": board.reference,
                             "mean_ratio": board.overall.get(label, float("nan")), "verdict": reason or "pass",
                             "passed": reason is None}
    frame = _frame([rows[k] for k in sorted(rows)], GATE_COLUMNS, [*skipped, *notes])
    frame.attrs["line"] = verdict.line()
    return verdict.passed, frame
