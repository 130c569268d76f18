"""
The exact tests the reports use to compare two models on counts, in plain Python (no SciPy needed):
- fisher_exact: two independent proportions k1/n1 and k2/n2 (e.g. passkey hits of two models on
  their own trials), Fisher's exact test, two-sided (the tables at most as probable as the one seen);
- mcnemar_exact: two models scored on the same items (e.g. multiple choice), from the discordant
  counts b (first right, second wrong) and c (first wrong, second right): the exact binomial test
  of b against Binomial(b + c, 1/2), two-sided;
- wilson: the 95% Wilson score interval of a proportion.
test/test_stats_tools.py checks them against SciPy's implementations.
"""
import math

# The two-sided tests count a table as "at most as probable" as the observed one within this
# relative tolerance, as SciPy does, so that tables of equal probability computed in a different
# order are not split by rounding.
_REL_TOL = 1 + 1e-7


def _hypergeom_pmf(x, n1, n2, k):
    """P(X = x) for the first row's successes, X ~ Hypergeometric: k successes among n1 + n2."""
    return math.comb(n1, x) * math.comb(n2, k - x) / math.comb(n1 + n2, k)


def fisher_exact(k1, n1, k2, n2):
    """Two-sided p-value of Fisher's exact test for k1/n1 against k2/n2."""
    if not (0 <= k1 <= n1 and 0 <= k2 <= n2) or n1 == 0 or n2 == 0:
        raise ValueError(f"fisher_exact: bad counts {k1}/{n1}, {k2}/{n2}")
    k = k1 + k2
    lo, hi = max(0, k - n2), min(k, n1)
    observed = _hypergeom_pmf(k1, n1, n2, k)
    p = sum(q for q in (_hypergeom_pmf(x, n1, n2, k) for x in range(lo, hi + 1)) if q <= observed * _REL_TOL)
    return min(1.0, p)


def mcnemar_exact(b, c):
    """Two-sided p-value of McNemar's exact test from the discordant counts b and c."""
    if b < 0 or c < 0:
        raise ValueError(f"mcnemar_exact: bad counts {b}, {c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, x) for x in range(0, min(b, c) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def wilson(k, n, z=1.959963984540054):
    """95% Wilson score interval of k successes in n trials."""
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (max(0.0, centre - half), min(1.0, centre + half))
