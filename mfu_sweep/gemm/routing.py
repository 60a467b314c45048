"""MoE routing models: how many tokens each of a rank's experts receives in one layer.

Every token of every expert-parallel rank (``tokens x ep``) picks ``top_k`` distinct experts out of
``experts``. Two models of that choice:

``balanced``
    Every expert receives ``tokens*ep*top_k/experts`` tokens, rounded half up (perfect load balance,
    what auxiliary-loss-balanced training aims at).
``skewed``
    Expert popularity follows a Zipf law, ``p_e ∝ rank_e^-skew`` (``skew`` = 1 by default), with the
    ranks given to the experts in a random order drawn from ``seed``; each token then draws its
    ``top_k`` experts without replacement with probabilities ``p`` (the Gumbel-top-k trick: the
    ``top_k`` largest ``log p_e + Gumbel noise``), so no expert receives a token twice. The counts
    are the real tallies of one such draw, seeded, the same on every machine (numpy's PCG64).

The rank holds experts ``0 .. experts/ep - 1`` of the model; their counts are what its expert
GEMMs see. Pure numpy, no torch.
"""

from __future__ import annotations

import math

import numpy as np

ROUTINGS = ("balanced", "skewed")
DEFAULT_SKEW = 1.0
# Tokens routed per chunk of the Gumbel-top-k draw (bounds the tokens x experts noise matrix).
CHUNK_TOKENS = 1 << 14


def balanced_tokens(tokens: int, top_k: int, experts: int) -> int:
    """Tokens one expert receives under perfect balance: ``tokens*top_k/experts`` rounded half up, at least 1."""
    return max(1, math.floor(tokens * top_k / experts + 0.5))


def zipf_popularity(experts: int, skew: float, rng: np.random.Generator) -> np.ndarray:
    """Routing probability of each expert: Zipf ranks ``1 .. experts`` with exponent ``skew``, shuffled by ``rng``."""
    weights = np.arange(1, experts + 1, dtype=np.float64) ** -skew
    return rng.permutation(weights / weights.sum())


def skewed_counts(tokens: int, top_k: int, experts: int, skew: float, seed: int) -> list[int]:
    """Tokens each expert receives when ``tokens`` tokens each draw ``top_k`` distinct experts (see the module)."""
    rng = np.random.default_rng(seed)
    log_p = np.log(zipf_popularity(experts, skew, rng))
    counts = np.zeros(experts, dtype=np.int64)
    for start in range(0, tokens, CHUNK_TOKENS):
        rows = min(CHUNK_TOKENS, tokens - start)
        keys = log_p + rng.gumbel(size=(rows, experts))
        chosen = np.argpartition(-keys, top_k - 1, axis=1)[:, :top_k]
        counts += np.bincount(chosen.ravel(), minlength=experts)
    return counts.tolist()


def local_expert_tokens(tokens: int, ep: int, top_k: int, experts: int, routing: str = "balanced",
                        skew: float = DEFAULT_SKEW, seed: int = 0) -> list[int]:
    """Tokens each of one rank's ``experts/ep`` experts receives in one layer under ``routing``.

    ``tokens`` is per rank; all ``ep`` ranks' tokens are routed over all ``experts``.
    """
    if routing not in ROUTINGS:
        raise ValueError(f"routing={routing!r} is not one of {', '.join(ROUTINGS)}")
    local = experts // ep
    if routing == "balanced":
        return [balanced_tokens(tokens * ep, top_k, experts)] * local
    return skewed_counts(tokens * ep, top_k, experts, skew, seed)[:local]
