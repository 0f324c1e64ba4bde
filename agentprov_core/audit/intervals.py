"""Confidence intervals for proportions and their differences (95 % unless told).

* :func:`wilson`: the Wilson score interval of one proportion ``k / n`` (Wilson 1927;
  Newcombe 1998, "Two-sided confidence intervals for the single proportion", method 3).
* :func:`paired_difference`: the difference of two proportions measured on the same units
  (a unit's outcome in corpus A and in corpus B): Newcombe's square-and-add interval for
  paired data (Newcombe 1998, "Improved confidence intervals for the difference between
  binomial proportions based on paired data", method 10), built from the two marginal
  Wilson intervals and the correlation of the pairs, with his correction of that
  correlation (``ad - bc`` shrunk by ``n / 2`` towards 0 when positive).
* :func:`unpaired_difference`: the difference of two independent proportions: Newcombe's
  hybrid score interval (1998, "Interval estimation for the difference between independent
  proportions", method 10), the same square-and-add with no correlation.

Every difference is *second minus first* (B - A). No interval is given for ``n = 0``.
"""

from __future__ import annotations

import math
from statistics import NormalDist

#: the confidence level of every interval the results table prints
LEVEL = 0.95


def z_of(level: float = LEVEL) -> float:
    """The two-sided standard normal quantile of ``level`` (1.959963984540054 for 0.95)."""
    return NormalDist().inv_cdf(0.5 + level / 2)


def wilson(k: int, n: int, level: float = LEVEL) -> tuple[float, float] | None:
    """The Wilson score interval ``(low, high)`` of ``k`` successes in ``n``; None if n = 0."""
    if n <= 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"{k} successes in {n}")
    z = z_of(level)
    p = k / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    low, high = centre - half, centre + half
    # exact at the edges (the formula gives them only up to rounding)
    return (0.0 if k == 0 else max(0.0, low), 1.0 if k == n else min(1.0, high))


def _square_and_add(d: float, p1: float, ci1: tuple[float, float], p2: float,
                    ci2: tuple[float, float], phi: float) -> tuple[float, float]:
    """The interval of ``d = p2 - p1`` from each proportion's interval and their
    correlation ``phi`` (Newcombe's square-and-add)."""
    l1, u1 = ci1
    l2, u2 = ci2
    down = math.sqrt(max(0.0, (p2 - l2) ** 2 + (u1 - p1) ** 2
                         - 2 * phi * (p2 - l2) * (u1 - p1)))
    up = math.sqrt(max(0.0, (u2 - p2) ** 2 + (p1 - l1) ** 2
                       - 2 * phi * (u2 - p2) * (p1 - l1)))
    return max(-1.0, d - down), min(1.0, d + up)


def paired_difference(both: int, only_a: int, only_b: int, neither: int,
                      level: float = LEVEL) -> tuple[float, float, float] | None:
    """``(difference, low, high)`` of p_B - p_A over paired units: ``both`` succeeded in A
    and B, ``only_a`` in A alone, ``only_b`` in B alone, ``neither`` in neither
    (Newcombe's method 10). None when there is no pair."""
    n = both + only_a + only_b + neither
    if n <= 0:
        return None
    k_a, k_b = both + only_a, both + only_b
    p_a, p_b = k_a / n, k_b / n
    ci_a, ci_b = wilson(k_a, n, level), wilson(k_b, n, level)
    assert ci_a is not None and ci_b is not None
    margins = k_a * (n - k_a) * k_b * (n - k_b)
    phi = 0.0
    if margins > 0:
        cross = both * neither - only_a * only_b
        if cross > n / 2:
            phi = (cross - n / 2) / math.sqrt(margins)
        elif cross < 0:
            phi = cross / math.sqrt(margins)
    low, high = _square_and_add(p_b - p_a, p_a, ci_a, p_b, ci_b, phi)
    return p_b - p_a, low, high


def unpaired_difference(k_a: int, n_a: int, k_b: int, n_b: int,
                        level: float = LEVEL) -> tuple[float, float, float] | None:
    """``(difference, low, high)`` of p_B - p_A for independent samples (Newcombe's hybrid
    score interval). None when either sample is empty."""
    ci_a, ci_b = wilson(k_a, n_a, level), wilson(k_b, n_b, level)
    if ci_a is None or ci_b is None:
        return None
    p_a, p_b = k_a / n_a, k_b / n_b
    low, high = _square_and_add(p_b - p_a, p_a, ci_a, p_b, ci_b, 0.0)
    return p_b - p_a, low, high
