"""A model step's time: its GEMM sum, the measured step, time to N steps, and when compile pays.

The seed's question for a researcher: for an ablation of N steps, which device and which mode finishes
first? Two sources answer it with one machinery: step files (``mfu-sweep steps``: the real step measured
in fresh processes) and sweeps of the step's GEMMs (their sum, the step's breakdown). Bottom to top:

- ``gemm_sum``: a step's GEMM time from sweeps (``predict`` without ``--steps``), and which GEMMs an
  inference step runs (``step_gemms``).
- ``counts``: which step counts N to show (``--steps 1,10,100`` or ``1-10000``).
- ``costs``: what every distinct GEMM of the step costs on one series (label, dtype, mode, compile cache),
  pass by pass: the steady time per call and the first call; which shapes failed and which are missing.
- ``runs``: a step file's runs as series (finished or not, and why); the file itself is read by
  :mod:`mfu_sweep.records.step_files`, the one model of a step file.
- ``draws``: the interval machinery, t-scaled weights per pass (GEMM sum) or per run (measured step).
- ``crossings``: where the leader changes in N (per device compile against eager, per pair of series) and,
  per shape, after how many calls compile pays.
- ``time_to_n``: first step, steady step and time to N steps per series, from either source (the GEMM sum's
  entry point, :func:`~mfu_sweep.analysis.steps.time_to_n.predict_steps`).
- ``measured``: the measured step's entry point, :func:`~mfu_sweep.analysis.steps.measured.predict_measured`,
  with the GEMM sum beside it "of which GEMMs".

Imports only the ground of ``analysis/`` and ``fits/`` (a roofline fit stands in for unmeasured shapes of a
GEMM sum); torch-free.

May import: the ground (``records/``, ``gemm/``, ``specs/``, ``util/``), ``analysis/ground/``, ``sources/``,
``fits/`` and ``verdicts/``; never fleet or refine, and no torch, matplotlib or Click.
"""
