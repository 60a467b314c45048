"""SYNTHETIC fleets of replicated devices for tests and benchmarks. Every number here is MADE UP.

Builds ``--distribute replicate``-style sweep documents (labels ``<base>.r<rank>``)
from :func:`synthetic.make_sweep_doc`, with two kinds of noise:

* per sample: multiplicative lognormal ``sample_noise`` on every sample;
* per shape, per device ("run-to-run"): every sample of one shape on one device
  moves together by a lognormal factor of sigma ``shape_noise``, the kind of
  noise a bootstrap of one run's samples cannot see.

``slow`` makes chosen devices slower by a factor over a FLOP range. Never write
the output into ``sweeps/`` or ``plots/``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from synthetic import make_sweep_doc, roofline_time

from mfu_sweep.gemm.shapes import Shape

FLEET_FLOPS = tuple(float(f) for f in np.geomspace(1e6, 2e12, 40))
SERIES = (("bf16", "eager"), ("bf16", "compile"), ("fp8", "eager"), ("fp8", "compile"))
TRUTH = {"P_tflops": 600.0, "W_tbs": 2.5, "t0_s": 6e-6}


def _time_fn(rng: np.random.Generator, shape_noise: float, factor: float, span: tuple[float, float],
             truth: Mapping[str, float]) -> Any:
    def time_fn(f: float, b: float) -> float:
        slow = factor if span[0] <= f <= span[1] else 1.0
        return roofline_time(f, b, **truth) * slow * float(np.exp(shape_noise * rng.standard_normal()))

    return time_fn


def fleet_docs(n_devices: int, *, base: str = "synthetic-gpu", series: Sequence[tuple[str, str]] = SERIES[:1],
               flops: Sequence[float] = FLEET_FLOPS, n_samples: int = 30, sample_noise: float = 0.01,
               shape_noise: float = 0.02, slow: Mapping[int, tuple[float, float, float]] | None = None,
               truth: Mapping[str, float] = TRUTH, seed: int = 0,
               shapes: Sequence[Shape] | None = None) -> list[dict[str, Any]]:
    """SYNTHETIC sweep documents of ``n_devices`` identical devices (one per device and series): square shapes
    at ``flops``, or ``shapes`` (then ``flops`` is unused; :func:`aspect_shapes` gives several per FLOP count).

    ``slow`` maps a rank to ``(factor, low_flops, high_flops)``: its times are
    multiplied by ``factor`` for shapes with FLOPs in that range.
    """
    docs = []
    for rank in range(n_devices):
        factor, lo, hi = (slow or {}).get(rank, (1.0, 0.0, 0.0))
        for j, (dtype, mode) in enumerate(series):
            rng = np.random.default_rng([seed, rank, j])
            scale = {"eager": 1.0, "compile": 0.9}[mode] * {"bf16": 1.0, "fp8": 2.0}.get(dtype, 1.0)
            t = {**truth, "P_tflops": truth["P_tflops"] * scale}
            docs.append(make_sweep_doc(
                f"{base}.r{rank}", flops=None if shapes else flops, shapes=shapes, dtype=dtype, mode=mode,
                n_samples=n_samples, noise=sample_noise,
                seed=int(rng.integers(2**31)), time_fn=_time_fn(rng, shape_noise, factor, (lo, hi), t),
                peak_tflops=t["P_tflops"] / 0.8, device_name=f"Synthetic GPU {rank}", **t,
            ))
    return docs


def aspect_shapes(n_counts: int = 40, low: int = 64, high: int = 8192) -> list[Shape]:
    """Four GEMMs of equal FLOPs at each of ``n_counts`` FLOP counts (square ``s^3`` and three aspects of it:
    ``2s x s x s/2`` and its rotations), as a mamf-finder grid has several shapes per FLOP count."""
    sides = sorted({2 * int(round(s / 2)) for s in np.geomspace(low, high, n_counts)})
    return [Shape(1, *dims) for s in sides
            for dims in ((s, s, s), (2 * s, s, s // 2), (s // 2, 2 * s, s), (s, s // 2, 2 * s))]
