"""Analysis commands: ``merge``, ``fit`` and ``compare`` (``export`` is :mod:`mfu_sweep.cli.export`).

Thin wrappers: each parses options, calls :mod:`mfu_sweep.analysis.sources.merge`,
:mod:`mfu_sweep.analysis.fits.fit` or :mod:`mfu_sweep.analysis.verdicts.compare`, and
prints. Registered on the main group by :mod:`mfu_sweep.cli`.
Every command reads sweep files and merged files alike.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import click

from mfu_sweep.analysis.fleet.gate import fleets_and_boards
from mfu_sweep.analysis.verdicts.margin import DEFAULT_MARGIN, VerdictSettings
from mfu_sweep.cli import board as ranked
from mfu_sweep.cli import contended
from mfu_sweep.cli.common import (
    domain_errors,
    dtype_aliases,
    echo_incomplete,
    gate_option,
    invalid_note,
    json_output,
    margin_option,
    no_cache_option,
    result_files,
    seed_option,
)
from mfu_sweep.cli.progress import load_files, step
from mfu_sweep.util.outputs import check_output_file, is_stdout
from mfu_sweep.util.text import counted

FILES = result_files


# -- merge -------------------------------------------------------------------------


@click.command()
@FILES
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), callback=json_output,
              help="Merged file to write (JSON); - writes it to standard output.")
@click.option("--relabel", "relabels", multiple=True, metavar="[FILE:]OLD=NEW",
              help="Rename device label OLD to NEW (only in sweeps from FILE when given); repeatable.")
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@click.option("--json", "as_json", is_flag=True,
              help="Print what was merged as JSON (output, sweeps, labels, files, notes) instead of the line.")
@domain_errors
def merge(files: tuple[str, ...], output: str, relabels: tuple[str, ...], force: bool, as_json: bool) -> None:
    """Merge sweep and merged files into one merged file, provenance intact.

    Inputs are validated; mixed schema versions are refused; a run given twice
    is kept once (a different run with the same run.id is an error). A label
    used by two different devices (name, backend or host) is an error unless
    --relabel renames one; the pieces of one sharded sweep (--shard I/N or
    torchrun --distribute shard: same shard count and settings) are one device
    even when they ran on different hosts. The output is sorted, so input
    order does not matter.

    \b
    Example:
        mfu-sweep merge sweeps/h100.json sweeps/trn2.json -o sweeps/all.json
        mfu-sweep merge a.json b.json --relabel b.json:cpu=cpu-laptop -o ab.json
        mfu-sweep merge sweeps/*.json -o sweeps/all.json --json
    """
    from mfu_sweep.analysis.sources.merge import Relabel, merge_files
    from mfu_sweep.records.results import write_json_atomic
    from mfu_sweep.util.filelock import output_lock

    rules = [Relabel.parse(r) for r in relabels]
    check_output_file(output, force)
    to_stdout = is_stdout(output)
    with nullcontext() if to_stdout else output_lock(output) as lock:
        if lock is not None and lock.note:
            click.echo(f"note: {lock.note}", err=True)
        if not to_stdout and Path(output).exists() and not force:
            raise click.ClickException(f"{output} exists; use --force to overwrite")
        result = merge_files(files, rules, on_invalid=invalid_note())
        write_json_atomic(output, result.to_json())  # -o -: standard output
    if as_json:
        click.echo(json.dumps({"output": output, "sweeps": len(result.sweeps), "files": list(files),
                               "labels": list(result.labels), "notes": list(result.notes)}, indent=1),
                   err=to_stdout)
        return
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    click.echo(f"merged {counted(len(result.sweeps), 'sweep')} from {counted(len(files), 'file')} "
               f"(labels: {', '.join(result.labels)}) into {'standard output' if to_stdout else output}",
               err=to_stdout)


# -- fit ---------------------------------------------------------------------------


def _pm(value: float, ci: Sequence[float], constrained: bool = True) -> str:
    from mfu_sweep.present.export.tables import round_to_uncertainty

    if not constrained:
        return "n/c"
    v, u = round_to_uncertainty(value, (ci[1] - ci[0]) / 2)
    return f"{v} ± {u}" if u is not None else v


def _pct(fraction: float | None) -> str:
    return f"{fraction:.0%}" if fraction is not None else "-"


def _fit_line(fit: Any) -> str:
    c = fit.constrained
    p = _pm(fit.p_tflops, fit.p_tflops_ci, c["p_tflops"])
    w = _pm(fit.w_tbs, fit.w_tbs_ci, c["w_tbs"])
    t0 = _pm(fit.t0_s * 1e6, [x * 1e6 for x in fit.t0_s_ci], c["t0_s"])
    model = fit.model if fit.blend_p is None else f"pnorm p={fit.blend_p:.2g}"
    p_frac = _pct(fit.compute_fraction) if c["p_tflops"] else "n/c"
    w_frac = _pct(fit.bandwidth_fraction) if c["w_tbs"] else "n/c"
    # "*" (in place of the space after a value, so columns stay put): a note below says why
    p_mark = _mark(fit.is_constrained and fit.below_measured)
    frac_mark = _mark((fit.compute_fraction or 0) > 1 and c["p_tflops"])
    poor = _mark(fit.poor and fit.is_constrained)  # an unconstrained fit says so in its one note instead
    return (f"{str(fit.key):<28} {model:<13} {p:>15}{p_mark}{_right(p_frac, 6)}{frac_mark}{_right(w, 15)} "
            f"{w_frac:>6} {t0:>15} {fit.rms_log_residual:>8.3f}{poor}{_right(f'{fit.r2_log:.4f}', 7)}{poor}"
            f"{_right(str(fit.n_shapes), 6)}")


def _mark(flagged: bool) -> str:
    return "*" if flagged else " "


def _right(text: str, width: int) -> str:
    """A column after a mark: ``text`` right-aligned, a blank before it where it fills it (not ``2.005*-0.0552*``)."""
    return text.rjust(width) if len(text) < width else " " + text


@click.command()
@FILES
@click.option("--model", type=click.Choice(["auto", "max", "pnorm"]), default="auto", show_default=True,
              help="auto: pnorm (smooth knee) when it wins on BIC, else max (hard roofline).")
@click.option("--n-boot", type=click.IntRange(1, 100_000), default=200, show_default=True,
              help="Bootstrap resamples for the intervals.")
@seed_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@contended.exclude_option
@domain_errors
def fit(files: tuple[str, ...], model: str, n_boot: int, seed: int, as_json: bool, exclude_contended: bool) -> None:
    """Fit t = t0 + max(F/P, B/W) (or a smooth variant) to every series.

    Reports the effective compute ceiling P and bandwidth W with their
    fractions of the vendor peak, the per-call overhead t0, the fit quality in
    log time and 95% bootstrap intervals ("±" is half the interval). "n/c":
    no measured shape is limited by that term, so the data do not pin it down.

    \b
    Example:
        mfu-sweep fit sweeps/*.json
        mfu-sweep fit sweeps/all.json --json --n-boot 1000
    """
    from mfu_sweep.analysis.fits.fit import fit_groups
    from mfu_sweep.analysis.fits.physical import measured_copy_bandwidth
    from mfu_sweep.analysis.ground.series import group_series
    from mfu_sweep.analysis.sources.runs import check_pooling

    loaded = load_files(files)
    sweeps = contended.apply(loaded, exclude_contended)
    check_pooling(sweeps)
    echo_incomplete(sweeps)
    with step("fitting", "series") as bar:
        fits, skipped = fit_groups(group_series(sweeps), model=model, n_boot=n_boot, seed=seed,
                                   copy_bandwidth=measured_copy_bandwidth(sweeps), progress=bar)
    if not fits:
        raise click.ClickException("nothing to fit: " + _nothing_to_fit(sweeps, skipped))
    if as_json:
        click.echo(json.dumps({"fits": [fits[k].to_json() for k in sorted(fits)],
                               "skipped": [{"series": str(k), "reason": r} for k, r in skipped.items()]}, indent=1))
    else:
        _print_fits(fits)
        for reason in skipped.values():
            click.echo(f"skipped: {reason}")


def _nothing_to_fit(sweeps: Sequence[Any], skipped: dict[Any, str]) -> str:
    """Why no series could be fitted: each skipped series' reason, or (no series at all) what the records are."""
    statuses = Counter(r.status for s in sweeps for r in s.records)
    if skipped or not statuses:
        return "; ".join(skipped.values()) or "the files hold no records"
    return (f"none of the {counted(sum(statuses.values()), 'record')} carries a timing (status ok or mismatch, "
            "with samples): " + ", ".join(f"{n} {status}" for status, n in statuses.most_common()))


def _print_fits(fits: dict[Any, Any]) -> None:
    if not fits:
        return
    click.echo(f"{'series':<28} {'model':<13} {'P TFLOP/s':>15} {'%peak':>6} {'W TB/s':>15} {'%peak':>6} "
               f"{'t0 µs':>15} {'RMS log':>8} {'R² log':>7} {'shapes':>6}")
    for key in sorted(fits):
        click.echo(_fit_line(fits[key]))
    if any(n in fits[k].quality_notes() for k in fits for n in fits[k].notes):
        click.echo("*: P below the best measured shape, above the peak, or a poor fit; the notes say which")
    for key in sorted(fits):
        for note in fits[key].notes:
            click.echo(f"note: {key}: {note}")


# -- compare -----------------------------------------------------------------------


def _value(metric: str, v: float) -> str:
    """A table cell; an MFU above 100% is marked ``*`` (the note under the table says why)."""
    return (f"{v * 100:.1f}%" + ("*" if v > 1 else "")) if metric == "mfu" else f"{v:.4g}"


ABOVE_PEAK_MARK = ("*: MFU above 100%: the peak is lower than this run reached (records flagged above_peak, kept, "
                   "not clipped)")


def _band_line(c: Any, band: Any) -> str:
    """One band of a comparison: its points (matched, model-based, left out), wins, ratio by the metric with its
    interval (or "too few shapes"), p(Holm), its own verdict and how much of it comes from matched shapes."""
    from mfu_sweep.analysis.verdicts.comparison import format_flops, interval_words, metric_name

    j = band.to_json(c.a, c.b)
    model = band.n - j["matched"]
    ci = "too few shapes for an interval" if band.too_few else interval_words(j)
    via = (f" (over {format_flops(band.via[0])}-{format_flops(band.via[1])}, p(Holm) {band.via[2]:.2g})"
           if band.via else "")
    left = (f"; left out: {j['left_out_a']} of {c.a}, {j['left_out_b']} of {c.b}"
            if j["left_out_a"] or j["left_out_b"] else "")
    measured = (f"; measured in the band: {j['measured_a']} of {c.a}, {j['measured_b']} of {c.b}{left}"
                if j["measured_a"] is not None else "")
    split = f"; {band.split.text()}" if band.split is not None and (band.split.model or band.split.shown) else ""
    return (f"band {format_flops(band.low_flops)}-{format_flops(band.high_flops)}: {band.n} points ({j['matched']} "
            f"matched shapes, {model} model-based{measured}), {c.a} ahead on {band.wins_a}, {c.b} on "
            f"{band.wins_b}; a/b {metric_name(c.metric)} x{j['ratio']:.4g} {ci}, p(Holm) {band.p_adjusted:.2g}: "
            f"{band.call(c.a, c.b)}{via}{split}")


def _print_comparison(c: Any) -> None:
    from mfu_sweep.analysis.verdicts.bands import lead_words
    from mfu_sweep.analysis.verdicts.comparison import format_flops, interval_words, metric_name

    name = metric_name(c.metric)
    wv = max(len(c.a), len(c.b)) + len(name) + 1
    wl = max(len(c.a), len(c.b), len("ambiguous"))
    click.echo(f"{c.a} vs {c.b}: {c.dtype} {c.mode}, {name}; leader per FLOP band: {c.band_test()}, "
               f"p < {c.alpha:g}; {c.evidence_note()}")
    click.echo(f"summary: {c.summary()}")
    for band in c.bands:
        click.echo(_band_line(c, band))
    for run in c.runs:
        j = run.to_json(c.a, c.b)
        what = (lead_words(j["leader"], c.metric) if j["leader"] else f"the same within {c.margin * 100:.3g}%")
        alone = "none called alone" if j["leader"] else "not all the same alone"
        split = f"; {j['split_words']}" if j["split_words"] else ""
        click.echo(f"run {format_flops(run.low_flops)}-{format_flops(run.high_flops)} ({run.last - run.first + 1} "
                   f"bands taken together, {alone}): a/b {name} x{j['ratio']:.4g} {interval_words(j)}, "
                   f"p(Holm) {run.p_adjusted:.2g}: {what} taken together ({run.split.text()}{split})")
    if max(c.passes) > 1:
        click.echo("per shape: each side's value at its median time over passes (the report's and the figures'); "
                   "a/b and its CI: the mean over passes of the log ratio, which the verdicts test")
    click.echo(f"{'FLOP':>11}  {'shape':<20} {c.a + ' ' + name:>{wv}} {c.b + ' ' + name:>{wv}} "
               f"{'a/b':>6}  {'95% CI':<17} {'p(band)':>8}  {'leader':<{wl}} method")
    for p in c.points:
        method = p.method if p.interpolated is None else f"model ({p.interpolated} predicted)"
        ci = f"[{p.ratio_low:.3g}, {p.ratio_high:.3g}]"
        click.echo(f"{format_flops(p.flops):>11}  {p.shape:<20} {_value(c.metric, p.a_value):>{wv}} "
                   f"{_value(c.metric, p.b_value):>{wv}} {p.ratio:>6.3f}  {ci:<17} {p.p_adjusted:>8.2g}  "
                   f"{p.leader or ('same' if p.same else 'ambiguous'):<{wl}} {method}")
    if c.metric == "mfu" and any(max(p.a_value, p.b_value) > 1 for p in c.points):
        click.echo(ABOVE_PEAK_MARK)
    for x in c.crossovers:  # one line per change of leader: the data's interval, the fits' estimates beside
        click.echo(f"crossover: {x.text()}")
    for note in c.notes:
        click.echo(f"note: {note}")
    click.echo(c.sentence())


@click.command()
@FILES
@click.option("--metric", type=click.Choice(["mfu", "tflops"]), default="mfu", show_default=True,
              help="mfu: fraction of each chip's own peak; tflops: absolute throughput.")
@click.option("--a", "label_a", default=None, metavar="[FILE:]LABEL[/DTYPE[/MODE]]",
              help="First series (ratios are a/b). With /DTYPE or /MODE, compares across dtypes or modes, "
                   "e.g. --a cpu/fp32/eager --b cpu/fp32/compile. With FILE: only that file's sweeps of LABEL "
                   "(shown as LABEL@FILE), to compare two runs of one label, e.g. --a old.json:cpu --b new.json:cpu.")
@click.option("--b", "label_b", default=None, metavar="[FILE:]LABEL[/DTYPE[/MODE]]",
              help="Second series, as --a.")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05,
              show_default=True, help="Family-wise error rate per pair; intervals are 1-alpha.")
@margin_option
@click.option("--min-run", type=click.IntRange(1, 1000), default=2, show_default=True,
              help="Leaderboards and the fleet view: a run of shapes where a device is faster or slower counts "
                   "only over at least this many consecutive FLOP counts (the band verdicts do not use it).")
@click.option("--calibrate", nargs=2, type=click.Path(dir_okay=False), default=None, metavar="REF_A REF_B",
              help="Two files of ONE reference chip, REF_A timed the way --a was (timer, cache, mode), REF_B the "
                   "way --b was: their per-FLOP-band ratio is divided out of a/b, its uncertainty kept.")
@click.option("--no-fit", is_flag=True, help="Skip the fitted-model crossovers (faster).")
@click.option("--fit-n-boot", type=click.IntRange(2, 100_000), default=200, show_default=True,
              help="Bootstrap resamples of each roofline fit.")
@click.option("--baseline", default=None, metavar="LABEL",
              help="One vs rest: every other device against LABEL, per FLOP band (add --pairwise for the details).")
@click.option("--pairwise", is_flag=True,
              help="Compare every pair even with many devices (default above 4 devices: a leaderboard per FLOP band).")
@click.option("--dtype", "dtypes", multiple=True, metavar="DTYPE", callback=dtype_aliases,
              help="Only this dtype (fp32, bf16 ... or torch's name, bfloat16); repeat for several. Default: all.")
@click.option("--mode", "modes", multiple=True, metavar="MODE",
              help="Only this mode (eager, compile, or a layout's series such as eager-nt); repeat for several. "
                   "Default: all.")
@seed_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@gate_option
@contended.exclude_option
@no_cache_option
@domain_errors
def compare(files: tuple[str, ...], metric: str, label_a: str | None, label_b: str | None, alpha: float,
            margin: float, min_run: int, calibrate: tuple[str, str] | None, no_fit: bool,
            fit_n_boot: int, baseline: str | None, pairwise: bool, dtypes: tuple[str, ...], modes: tuple[str, ...],
            seed: int, as_json: bool, fail_on: str | None, exclude_contended: bool, no_cache: bool) -> None:
    """Compare series with the same dtype and mode along FLOPs: who leads where, and the crossovers.

    Every pair of series is compared (or those with --a/--b). Leads are
    decided once per FLOP band (half-decades) from all its shapes, the shape
    being the unit: without passes a signed-rank test over the band's shapes
    ("shapes": run-to-run variation not measured; bands widened to 10
    shapes), with --repeats 2 or more a band mean with shape as a random
    effect against run-to-run variation ("runs"); Holm's correction over the
    bands and their runs of adjacent bands. Each band is one of four verdicts:
    a faster or b faster (beyond --margin, default 2%), the same within the
    margin, or ambiguous. Segments, the summary shares and the sentence all come from those
    band verdicts; the per-shape table is detail. Crossovers come from the
    bands and from the fitted rooflines ("fit"), each with an interval. When
    the two sides were timed differently (timer, cache policy, mode) a note
    says so; --calibrate divides out the difference measured on one chip. For a torchrun replicate
    run (labels <label>.r0, .r1 ...) it first prints the fleet view (devices
    significantly slower than the rest, the slowest) and the spread across the
    devices of one chip: slowest/fastest median per shape.

    With more than 4 devices of one dtype and mode (and no --a/--b/--pairwise)
    it prints a leaderboard per FLOP band instead: who is faster or slower
    than the median of the other devices by more than --margin (default 2%),
    how many are the same within it (an equivalence test) or ambiguous, the
    median and the slowest device (Holm over devices x bands). --baseline
    LABEL ranks every other device against LABEL. A difference within the
    margin is never a lead or a flag.

    --fail-on slower makes compare a gate (a Slurm epilog, a CI step): exit 1
    when a device is slower than the rest, or than its --baseline, by more
    than the margin, else 0, with one "gate:" line; --fail-on ambiguous also
    fails a device that some band cannot show within the margin. Ranking many
    files, compare reads them on every core and caches what the ranking needs
    of each (by content, and by stat as git does) in $XDG_CACHE_HOME/mfu-sweep:
    a gate over unchanged files opens none, a file changed in any way (its
    ctime moves) is read again (--no-cache: read every file).

    With --metric mfu (the default), a pair or leaderboard entry whose series
    has no peak for its dtype (a chip with no spec entry) is skipped with one
    note each, naming --metric tflops; the command fails only when nothing
    could be compared.

    \b
    Example:
        mfu-sweep compare sweeps/all.json
        mfu-sweep compare sweeps/node*.json --baseline h100.r0
        mfu-sweep compare sweeps/node*.json --baseline h100.r0 --pairwise
        mfu-sweep compare sweeps/node*.json --metric tflops --fail-on slower
        mfu-sweep compare sweeps/h100.json sweeps/trn2.json --a h100-cuda --b trn2-neuron --metric tflops
        mfu-sweep compare sweeps/all.json --json > compare.json
        mfu-sweep compare sweeps/all.json --dtype bf16 --mode compile
        mfu-sweep compare sweeps/amd-epyc-cpu*.json --a amd-epyc-cpu/fp32/eager --b amd-epyc-cpu/fp32/compile
        mfu-sweep compare before.json after.json --a before.json:amd-epyc-cpu --b after.json:amd-epyc-cpu
    """
    from mfu_sweep.analysis.fleet.spread import replicate_spreads
    from mfu_sweep.analysis.ground.series import group_series
    from mfu_sweep.analysis.sources.runs import check_pooling, label_collisions, pick_runs
    from mfu_sweep.records.contention import contention_reason
    from mfu_sweep.records.summaries import filter_sweeps

    whole = label_a is None and label_b is None
    fast = ranked.fleet_inputs(files, exclude_contended, baseline, not no_cache) \
        if whole and not pairwise and not calibrate and not dtypes and not modes else None
    if fast is not None:  # a fleet gate: digests of the files, series of per-shape medians
        sweeps, series, hints = fast
    else:
        loaded = load_files(files)
        if dtypes or modes:
            loaded = filter_sweeps(loaded, dtypes, modes)
        sweeps, label_a, label_b = pick_runs(contended.apply(loaded, exclude_contended), label_a, label_b,
                                             files)
        check_pooling(sweeps)
        echo_incomplete(sweeps)
        hints = label_collisions(sweeps)
        series = group_series(sweeps)
    refs = tuple(group_series(load_files([path])) for path in calibrate) if calibrate else None
    ranking = ranked.use_board(series, baseline, pairwise, label_a, label_b)
    skipped: list[str] = []
    settings = VerdictSettings(alpha, margin, min_run, seed, not no_fit, fit_n_boot)
    fleets, boards, notes = (fleets_and_boards(series, metric, baseline, ranking, skipped, settings)
                             if whole else ([], [], []))
    verdict = ranked.gate_of(fleets, boards, fail_on)
    comps = [] if ranking and not pairwise else _pairs(sweeps, metric, baseline or label_a, label_b, hints, settings,
                                                       skipped, refs)
    if skipped and not (comps or fleets or boards):
        raise click.ClickException(f"nothing to compare: {counted(len(skipped), 'pair')} skipped, a series has no peak "
                                   f"for MFU (first: {skipped[0]})")
    layouts: list[str] = []
    if not ranking or pairwise:  # the series no pair reaches: the other device measured other layouts
        from mfu_sweep.analysis.verdicts.compare import layouts_left_out
        layouts = layouts_left_out(series, baseline or label_a, label_b)
    for hint in hints:
        click.echo(f"note: {hint}", err=True)
    spreads = replicate_spreads(sweeps, series) if whole and not ranking else []
    if as_json:
        out: dict[str, Any] = {"comparisons": [c.to_json() for c in comps], **ranked.boards_json(fleets, boards, notes)}
        reasons = [r for r in (contention_reason(sweeps, c.a, c.b) for c in comps) if r]
        if reasons:
            out["contention"] = reasons
        if skipped:
            out["skipped"] = skipped
        out.update({"left_out_layouts": layouts} if layouts else {})
        if spreads:
            out["spreads"] = [s.to_json() for s in spreads]
        if verdict:
            out["gate"] = verdict.to_json()
        click.echo(json.dumps(out, indent=1))
        ranked.finish_gate(verdict, err=True)
        return
    speed = _speed(sweeps, comps, metric, settings, refs)
    for line in _pair_lines(comps, speed):  # the gist first, one line per pair (MFU and speed); the details follow
        click.echo(line)
    for line in skipped + layouts:
        click.echo(f"note: {line}")
    ranked.echo_boards(fleets, boards, notes)
    for s in spreads:
        click.echo(f"spread: {s.sentence()}")
    for c in comps:
        click.echo("")
        _print_comparison(c)
        reason = contention_reason(sweeps, c.a, c.b)
        if reason:
            click.echo(f"contention: {reason}")
    ranked.finish_gate(verdict)


def _pair_lines(comps: Sequence[Any], speed: Sequence[Any]) -> list[str]:
    """``pair_sentences`` of the pairs; none without pairs (the fleet gate: the report's modules not imported)."""
    if not comps:
        return []
    from mfu_sweep.present.report.headline import pair_sentences

    return pair_sentences(comps, speed)


def _pairs(sweeps: Sequence[Any], metric: str, a: str | None, b: str | None, hints: Sequence[str],
           settings: VerdictSettings, skipped: list[str], refs: Any) -> list[Any]:
    """``compare_all`` of the pairs, no-peak ones noted in ``skipped`` (imported here: the fleet gate never pairs)."""
    from mfu_sweep.analysis.verdicts.compare import CompareError, compare_all

    try:
        return compare_all(sweeps, metric, a, b, settings, on_no_peak=lambda exc: skipped.append(str(exc)),
                           calibration=refs)
    except CompareError as exc:
        raise click.ClickException(f"{exc}; {hints[0] if hints else _compare_fix(str(exc))}") from None


def _speed(sweeps: Sequence[Any], comps: Sequence[Any], metric: str, settings: VerdictSettings, refs: Any) -> list:
    """With ``--metric mfu``, the same pairs in TFLOP/s (data only, default margin): the opening line says both."""
    if metric != "mfu" or not comps:
        return []
    from mfu_sweep.analysis.ground.series import SeriesKey, group_series
    from mfu_sweep.analysis.verdicts.pair import CompareError, compare_pair

    series, out = group_series(sweeps), []
    data_only = VerdictSettings(settings.alpha, DEFAULT_MARGIN, settings.min_run, settings.seed, use_fit=False)
    for c in comps:
        a, b = SeriesKey(c.a, c.dtype, c.mode), SeriesKey(c.b, c.dtype, c.mode)
        if a in series and b in series:  # across dtypes or modes (--a/--b selectors) the keys differ: MFU only
            try:
                out.append(compare_pair(series[a], series[b], "tflops", data_only, calibration=refs))
            except CompareError:
                continue
    return out


COMPARE_FIXES = {
    "no series labelled": "use one of those labels (FILE:LABEL picks one file's series)",
    "need two series": "give files of two devices, or compare dtypes or modes of one device with "
                       "--a LABEL/DTYPE/MODE --b LABEL/DTYPE/MODE",
    "share no dtype and mode": "pick what each side measured with --a LABEL/DTYPE/MODE --b LABEL/DTYPE/MODE",
}


def _compare_fix(message: str) -> str:
    """The fix for a comparison that cannot be made, by what its message says."""
    return next((fix for key, fix in COMPARE_FIXES.items() if key in message),
                "see `mfu-sweep compare --help` for --a/--b selectors")
