"""Time to N steps: what a model step costs the first time and every time after, and when compile pays.

The seed's question for a researcher: for an ablation of N steps, which device and which mode finishes
first? Each part answers one piece, bottom to top:

- ``counts``: which step counts N to show (``--steps 1,10,100`` or ``1-10000``).
- ``costs``: what every distinct GEMM of the step costs on one series (label, dtype, mode, compile cache),
  pass by pass: the steady time per call and the first call; which shapes failed and which are missing.
- ``draws``: the interval machinery, a bootstrap over the passes.
- ``timeline``: first step, steady step and time to N steps per series (the entry point,
  :func:`~mfu_sweep.analysis.steps.timeline.predict_steps`).
- ``crossings``: where the leader changes in N (per device compile against eager, per pair of series) and,
  per shape, after how many calls compile pays.

Imports only the ground of ``analysis/`` and ``predict`` (what a GEMM-only prediction leaves out); torch-free.
"""
