"""What a GEMM is: shapes and their FLOP/byte arithmetic, shape files, dtypes, workload families (LLM steps,
DeepBench), transformer configs and their options, MoE routing.

May import: ``util/`` and itself; never ``specs/``, ``records/``, a stage, torch, matplotlib or Click.
"""
