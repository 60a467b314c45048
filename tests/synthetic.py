"""SYNTHETIC result documents for tests. Every number here is MADE UP.

Nothing produced by this module was measured on any device. It builds valid
v1 sweep documents whose per-call times are drawn from a roofline-with-overhead
model, ``t = t0 + max(F / P, B / W)``, times multiplicative lognormal noise, so
that fitting and comparison code can be tested against known true parameters.
Never write its output into ``sweeps/`` or ``plots/``.

Beyond independent per-sample noise, :class:`NoiseModel` makes the SYNTHETIC
run-to-run noise that real machines have (issue 12): per-shape shifts that
move all samples of a shape in one pass together, a slow drift across
consecutive shapes in sweep order, and outlying passes at a shape.
``make_sweep_doc(..., noise_model=..., repeats=R)`` writes R passes, each in
its own seeded shuffled order (or FLOP order), every record with its pass
(JSON key ``pass``, ``Record.pass_index``); :func:`log_noise` gives the same noise as arrays, vectorised
over seeds, for false-lead and coverage tests. The ``log_ratio_*`` functions
are planted true differences (log of a's speed over b's) along log10 FLOPs.

The device block says ``"backend": "synthetic"`` and ``"synthetic": true``, and
the sweep's ``settings.synthetic`` records the true parameters.

Example
-------
>>> from synthetic import make_sweep_doc, write_sweep  # pytest puts tests/ on sys.path
>>> from mfu_sweep.records.results import parse_document
>>> doc = make_sweep_doc("chip-a", P_tflops=800, W_tbs=3.0, t0_s=8e-6,
...                      flops=[1e8, 1e9, 1e10, 1e11, 1e12], seed=1)
>>> [sweep] = parse_document(doc)
>>> sweep.label, len(sweep.records)
('chip-a', 5)

In a pytest test, ``path = write_sweep(tmp_path, doc)`` writes it to
``tmp_path / "chip-a.json"``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from mfu_sweep.gemm.dtypes import get_dtype
from mfu_sweep.gemm.shapes import Shape, parse_shape
from mfu_sweep.records.results import Record, Sweep, finish_record, write_json_atomic
from mfu_sweep.specs import Peak
from mfu_sweep.util.stats import median_ci

TimeFn = Callable[[float, float], float]
DEFAULT_FLOPS = tuple(float(f) for f in np.geomspace(1e6, 2e12, 16))
STAMP = "2025-01-01T00:00:00Z"


@dataclass(frozen=True)
class NoiseModel:
    """SYNTHETIC noise of a sweep, all in log time (0.02 is about 2%).

    ``sample``: independent lognormal noise per sample. ``shape_shift``: a
    normal shift per (pass, shape) that moves all samples of that shape in that
    pass. ``drift`` and ``drift_len``: an AR(1) slow drift along the positions
    of the whole sweep (all passes, in the order shapes were measured), with
    stationary sd ``drift`` and correlation length ``drift_len`` positions.
    ``outlier_rate`` and ``outlier_size``: the chance that a (pass, shape) is
    slowed by ``outlier_size`` (a hiccup lasting one shape). ``pass_shift``: a
    normal shift per pass that moves every shape of that pass (a warmer chip, a
    lower clock for a whole run); drawn last, so the other parts do not depend on it.
    """

    name: str
    sample: float = 0.01
    shape_shift: float = 0.0
    drift: float = 0.0
    drift_len: float = 4.0
    outlier_rate: float = 0.0
    outlier_size: float = 0.3
    pass_shift: float = 0.0


NOISE_MODELS = {m.name: m for m in (
    NoiseModel("per-sample"),
    NoiseModel("per-shape 1%", shape_shift=0.01),
    NoiseModel("per-shape 2%", shape_shift=0.02),
    NoiseModel("per-shape 5%", shape_shift=0.05),
    NoiseModel("drift", shape_shift=0.005, drift=0.02, drift_len=4.0),
    NoiseModel("outliers", shape_shift=0.01, outlier_rate=0.03, outlier_size=0.3),
)}


def sweep_positions(batch: tuple[int, ...], repeats: int, n_shapes: int, rng: np.random.Generator,
                    shuffle: bool) -> np.ndarray:
    """Position in the sweep of each (pass, shape): pass p measures its shapes at p*n .. p*n+n-1.

    ``shuffle`` gives every pass its own random order (what ``sweep --repeats`` does);
    otherwise shapes are measured in FLOP order (index order) in every pass.
    """
    base = np.broadcast_to(np.arange(n_shapes), (*batch, repeats, n_shapes))
    order = rng.permuted(base, axis=-1) if shuffle else base
    pos = np.empty_like(order)
    np.put_along_axis(pos, order, np.broadcast_to(np.arange(n_shapes), order.shape), axis=-1)
    return pos + (np.arange(repeats) * n_shapes)[:, None]


def _ar1(batch: tuple[int, ...], length: int, sd: float, corr_len: float, rng: np.random.Generator) -> np.ndarray:
    phi = float(np.exp(-1.0 / corr_len))
    eps = rng.standard_normal((*batch, length))
    out = np.empty_like(eps)
    out[..., 0] = sd * eps[..., 0]
    for i in range(1, length):
        out[..., i] = phi * out[..., i - 1] + sd * np.sqrt(1 - phi**2) * eps[..., i]
    return out


def log_noise(model: NoiseModel, n_shapes: int, *, repeats: int = 1, n_samples: int = 20,
              rng: np.random.Generator, shuffle: bool = True, batch: tuple[int, ...] = ()) -> np.ndarray:
    """SYNTHETIC log multipliers of the time, shape ``(*batch, repeats, n_shapes, n_samples)``.

    ``batch`` adds leading axes (e.g. ``(seeds,)``) so many synthetic sweeps are drawn at once.
    """
    lead = (*batch, repeats, n_shapes)
    out = model.sample * rng.standard_normal((*lead, n_samples))
    if model.shape_shift:
        out += model.shape_shift * rng.standard_normal(lead)[..., None]
    if model.drift:
        path = _ar1(batch, repeats * n_shapes, model.drift, model.drift_len, rng)
        pos = sweep_positions(batch, repeats, n_shapes, rng, shuffle)
        flat = pos.reshape(*batch, -1)
        out += np.take_along_axis(path, flat, axis=-1).reshape(lead)[..., None]
    if model.outlier_rate:
        out += model.outlier_size * (rng.random(lead) < model.outlier_rate)[..., None]
    if model.pass_shift:
        out += model.pass_shift * rng.standard_normal((*batch, repeats))[..., None, None]
    return out


def log_ratio_constant(log10_flops: np.ndarray, size: float) -> np.ndarray:
    """SYNTHETIC truth: a is faster than b by ``size`` (log) everywhere."""
    return np.full(np.shape(log10_flops), float(size))


def log_ratio_window(log10_flops: np.ndarray, lo: float, hi: float, size: float) -> np.ndarray:
    """SYNTHETIC truth: a leads by ``size`` (log) for log10 FLOPs in [lo, hi], no difference elsewhere."""
    x = np.asarray(log10_flops, dtype=float)
    return np.where((x >= lo) & (x <= hi), float(size), 0.0)


def log_ratio_seed_crossover(log10_flops: np.ndarray, size: float = 0.1) -> np.ndarray:
    """SYNTHETIC truth like the seed's question: a leads 1-100 GFLOP, b 100 GFLOP-1 TFLOP, a above 1 TFLOP.

    Below 1 GFLOP the two are equal. Steps are smoothed over a tenth of a decade (tanh).
    """
    x = np.asarray(log10_flops, dtype=float)
    step = lambda c: 0.5 * (1 + np.tanh((x - c) / 0.05))  # noqa: E731
    return float(size) * (step(9.0) - 2 * step(11.0) + 2 * step(12.0))


def roofline_time(flops: float, nbytes: float, P_tflops: float, W_tbs: float, t0_s: float) -> float:  # noqa: N803
    """Seconds per call of the true model: ``t0 + max(F / P, B / W)``."""
    return t0_s + max(flops / (P_tflops * 1e12), nbytes / (W_tbs * 1e12))


def square_shapes(flops: Sequence[float]) -> list[Shape]:
    """Square shapes ``s x s x s`` with ``2 s**3`` closest to each FLOP count."""
    return [Shape(1, s, s, s) for s in (max(1, round((f / 2.0) ** (1 / 3))) for f in flops)]


def _shapes(shapes: Sequence[Shape | str] | None, flops: Sequence[float] | None) -> tuple[list[Shape], str]:
    if shapes is not None and flops is not None:
        raise ValueError("give shapes or flops, not both")
    if shapes is not None:
        return [s if isinstance(s, Shape) else parse_shape(s) for s in shapes], "custom"
    return square_shapes(DEFAULT_FLOPS if flops is None else flops), "square"


def _run_id(parts: Sequence[Any]) -> str:
    return "synthetic-" + hashlib.sha1(repr(tuple(parts)).encode()).hexdigest()[:24]


def _peak(dtype: str, peak_tflops: float, bandwidth_tbs: float | None) -> Peak:
    return Peak(
        chip=None,
        tflops={dtype: float(peak_tflops)} if peak_tflops else {},
        memory_bandwidth_tbs=float(bandwidth_tbs) if bandwidth_tbs else None,
        source="SYNTHETIC: made-up peak for tests (tests/synthetic.py)",
    )


def _record(shape: Shape, family: str, dtype: str, mode: str, status: str, true_s: float,
            rng: np.random.Generator, noise: float, n_samples: int, peak: Peak,
            log_mult: np.ndarray | None = None, pass_index: int | None = None) -> Record:
    dt = get_dtype(dtype)
    base = Record(shape=shape, dtype=dtype, mode=mode, flops=shape.flops, bytes=shape.bytes(dt),
                  intensity=shape.intensity(dt), status=status, family=family, timer="synthetic",
                  extra={} if pass_index is None else {"pass": pass_index})
    if status not in ("ok", "mismatch"):
        return replace(base, error=f"SYNTHETIC {status}")
    if log_mult is None:
        log_mult = noise * rng.standard_normal(n_samples)
    samples = tuple(float(x) for x in true_s * np.exp(log_mult))
    rec = replace(base, samples_s=samples, block_size=1, first_call_s=5.0 * true_s,
                  compile_s=1.0 if mode == "compile" else None, rel_error=0.5 if status == "mismatch" else 1e-3)
    return finish_record(rec, peak, ci=median_ci(samples))


def make_sweep_doc(
    label: str,
    *,
    P_tflops: float,  # noqa: N803
    W_tbs: float,  # noqa: N803
    t0_s: float,
    shapes: Sequence[Shape | str] | None = None,
    flops: Sequence[float] | None = None,
    dtype: str = "bf16",
    mode: str = "eager",
    peak_tflops: float | None = None,
    bandwidth_tbs: float | None = None,
    noise: float = 0.02,
    n_samples: int = 20,
    seed: int = 0,
    statuses: Sequence[str] | None = None,
    time_fn: TimeFn | None = None,
    device_name: str | None = None,
    backend: str = "synthetic",
    host: str = "synthetic-host",
    run_id: str | None = None,
    noise_model: NoiseModel | None = None,
    repeats: int = 1,
    shuffle: bool = True,
) -> dict[str, Any]:
    """A valid v1 sweep document with SYNTHETIC samples from a roofline model.

    Parameters
    ----------
    label:
        ``device.label``: the series name.
    P_tflops, W_tbs, t0_s:
        True compute ceiling (TFLOP/s), bandwidth (TB/s) and per-call overhead (s).
    shapes, flops:
        Either explicit shapes (``Shape`` or ``"MxNxK"``) or FLOP counts, turned into
        square shapes; neither gives 16 squares log-spaced over 1e6..2e12 FLOP.
    dtype, mode:
        Record dtype and mode.
    peak_tflops, bandwidth_tbs:
        The vendor peak written in the ``peak`` block. ``None`` (default) means
        ``P_tflops / 0.8`` and ``W_tbs / 0.9``; ``0`` means no figure (MFU is null).
    noise:
        Sigma of the multiplicative lognormal noise on each sample.
    n_samples, seed:
        Samples per record and the seed of the noise.
    statuses:
        One status per shape (default all ``"ok"``); ``"mismatch"`` keeps samples,
        the failure statuses have none.
    time_fn:
        ``time_fn(flops, bytes) -> seconds`` replacing the roofline (P, W, t0 are
        then only recorded, not used).
    device_name, backend, host, run_id:
        Device identity and run id (default: derived from the label and the
        parameters, so equal arguments give an equal run id).
    noise_model, repeats, shuffle:
        With a :class:`NoiseModel` (which then replaces ``noise``), ``repeats``
        passes over the shapes, each in its own seeded shuffled order (or FLOP
        order without ``shuffle``); every record carries its pass.

    Returns
    -------
    dict
        The JSON document; ``mfu_sweep.records.results.parse_document`` accepts it.
    """
    shape_list, family = _shapes(shapes, flops)
    statuses = list(statuses) if statuses is not None else ["ok"] * len(shape_list)
    if len(statuses) != len(shape_list):
        raise ValueError(f"statuses has {len(statuses)} entries for {len(shape_list)} shapes")
    peak = _peak(dtype, P_tflops / 0.8 if peak_tflops is None else peak_tflops,
                 W_tbs / 0.9 if bandwidth_tbs is None else bandwidth_tbs)
    rng = np.random.default_rng(seed)
    dt = get_dtype(dtype)
    model = time_fn or (lambda f, b: roofline_time(f, b, P_tflops, W_tbs, t0_s))
    pairs = list(zip(shape_list, statuses, strict=True))
    if noise_model is None:
        records = [_record(s, family, dtype, mode, st, model(s.flops, s.bytes(dt)), rng, noise, n_samples, peak)
                   for s, st in pairs]
    else:
        mult = log_noise(noise_model, len(pairs), repeats=repeats, n_samples=n_samples, rng=rng, shuffle=shuffle)
        records = [_record(s, family, dtype, mode, st, model(s.flops, s.bytes(dt)), rng, noise, n_samples, peak,
                           mult[p, i], p) for p in range(repeats) for i, (s, st) in enumerate(pairs)]
    truth = {"P_tflops": P_tflops, "W_tbs": W_tbs, "t0_s": t0_s, "noise": noise, "n_samples": n_samples,
             "seed": seed, "time_fn": getattr(time_fn, "__qualname__", None)}
    if noise_model is not None:
        truth.update(noise_model=noise_model.__dict__, repeats=repeats, shuffle=shuffle)
    rid = run_id or _run_id([label, dtype, mode, backend, host, device_name, sorted(truth.items()),
                             [str(s) for s in shape_list], statuses, peak.to_json()])
    sweep = Sweep(
        tool={"name": "mfu-sweep-synthetic", "version": "1"},
        run={"id": rid, "started_at": STAMP, "finished_at": STAMP, "argv": ["tests/synthetic.py", label],
             "host": host, "git_sha": None},
        environment={"synthetic": True, "note": "SYNTHETIC: made-up numbers for tests"},
        device={"backend": backend, "name": device_name or f"Synthetic {label}", "chip": None, "index": 0,
                "count": 1, "label": label, "synthetic": True},
        peak=peak, records=tuple(records), settings={"synthetic": truth},
    )
    return sweep.to_json()


def write_sweep(tmp_path: Path, doc: dict[str, Any], name: str | None = None) -> Path:
    """Write ``doc`` to ``tmp_path / (name or "<label>.json")`` and return the path."""
    path = Path(tmp_path) / (name or f"{doc['device']['label']}.json")
    write_json_atomic(path, doc)
    return path


def example_pair() -> tuple[dict[str, Any], dict[str, Any]]:
    """Two small SYNTHETIC sweeps, "chip-a" and "chip-b", with one planted crossover near 5 GFLOP.

    chip-a has the lower overhead (leads on small GEMMs), chip-b the higher
    ceiling (leads on large ones); both have the same made-up peak, so MFU and
    TFLOP/s give the same verdicts. chip-a's largest shape failed (oom) and
    chip-b has one extra shape, so one point is interpolated. Used by the
    golden-file tests.
    """
    flops = [float(f) for f in np.geomspace(1e8, 1e12, 9)]
    common = {"W_tbs": 2.0, "flops": flops, "noise": 0.01, "n_samples": 10, "peak_tflops": 800.0}
    a = make_sweep_doc("chip-a", P_tflops=600.0, t0_s=8e-6, seed=11, statuses=["ok"] * 8 + ["oom"], **common)
    b = make_sweep_doc("chip-b", P_tflops=630.0, t0_s=8.4e-6, seed=12, **{**common, "flops": [*flops, 2e10]})
    return a, b


@dataclass(frozen=True)
class SyntheticPairs:
    """SYNTHETIC sweeps of two chips, many seeds at once, as arrays (log time per call).

    ``log_a``/``log_b`` have shape ``(seeds, repeats, n_shapes, n_samples)``: the
    log multipliers of the time of each sample, with a's times divided by
    ``exp(truth)`` (so ``truth`` is the true log of a's speed over b's). The
    common roofline cancels in every ratio and is left out.
    """

    log10_flops: np.ndarray
    truth: np.ndarray
    log_a: np.ndarray
    log_b: np.ndarray

    def pass_values(self, side: str) -> np.ndarray:
        """Log speed (minus log median time) per (seed, pass, shape)."""
        return -np.median(self.log_a if side == "a" else self.log_b, axis=-1)


def synthetic_pairs(model: NoiseModel, *, seeds: int, truth: np.ndarray | None = None, n_shapes: int = 48,
                    lo: float = 6.0, hi: float = 13.0, repeats: int = 1, n_samples: int = 20, shuffle: bool = True,
                    seed: int = 0) -> SyntheticPairs:
    """SYNTHETIC pairs of chips, ``n_shapes`` log-spaced from 10**lo to 10**hi FLOP.

    Without ``truth`` the two are identical: the same machine measured twice, independently.
    """
    x = np.linspace(lo, hi, n_shapes)
    t = np.zeros(n_shapes) if truth is None else np.asarray(truth, dtype=float)
    rng = np.random.default_rng(seed)
    kw = {"repeats": repeats, "n_samples": n_samples, "rng": rng, "shuffle": shuffle, "batch": (seeds,)}
    log_a = log_noise(model, n_shapes, **kw) - t[:, None]
    return SyntheticPairs(log10_flops=x, truth=t, log_a=log_a, log_b=log_noise(model, n_shapes, **kw))
