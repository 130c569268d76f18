"""
The tests the reports use to compare models, and which applies where:
- mcnemar_exact: two models scored on the same items: multiple choice (eval/compare_mc.py) and
  passkey trials that share their prompts (eval/passkey_report.py; every model of
  scripts/passkey_experiment.sh answers the same prompts), from the discordant counts b (first
  right, second wrong) and c (first wrong, second right): the exact binomial test of b against
  Binomial(b + c, 1/2), two-sided. The paired test: the items both models get right or wrong say
  nothing about the difference.
- fisher_exact: two independent proportions k1/n1 and k2/n2 (two models scored on different,
  independently drawn items; eval/passkey_report.py --independent), Fisher's exact test, two-sided
  (the tables at most as probable as the one seen). Not for paired items: it ignores the pairing.
- wilson: the 95% Wilson score interval of a proportion.
- holm: Holm's step-down adjustment of the p-values of one table's comparisons (every cell that
  claims a difference is one comparison), so that a table of m comparisons keeps its family-wise
  error at the level: a cell is a finding where its adjusted p is below 0.05.
- student_t975 and t_test_from_interval: the 95% t-interval over seeds (or seed pairs) the C++
  tools print (eval/loss_vs_length.h), and the two-sided p of the t-test of mean 0 recovered from
  it (SciPy for the t distribution).
test/test_stats_tools.py checks them against SciPy's implementations or direct computations.
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


def holm(pvalues):
    """Holm's step-down adjusted p-values, in the order given (None entries stay None and do not
    count as comparisons). Sorted ascending, p_(1) <= ... <= p_(m), the adjusted p_(i) is
    max over j <= i of min(1, (m - j + 1) p_(j)); a hypothesis is rejected at level alpha by Holm's
    procedure exactly where its adjusted p is <= alpha."""
    idx = [i for i, p in enumerate(pvalues) if p is not None and not math.isnan(p)]
    for i in idx:
        if not 0.0 <= pvalues[i] <= 1.0:
            raise ValueError(f"holm: p-value {pvalues[i]} out of [0, 1]")
    order = sorted(idx, key=lambda i: pvalues[i])
    m = len(order)
    out = [None] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


# 97.5% quantiles of Student's t the C++ tools use (eval/loss_vs_length.h, student_t975): three
# decimals up to 20 degrees of freedom, 1.96 + 2.4 / df beyond.
_T975_CPP = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
             2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086]


def student_t975_cpp(df):
    """The 97.5% t quantile eval/loss_vs_length.h's intervals over seeds were computed with."""
    if df < 1:
        return math.nan
    return _T975_CPP[df - 1] if df <= 20 else 1.96 + 2.4 / df


def student_t975(df):
    """The exact 97.5% quantile of Student's t with df degrees of freedom (SciPy)."""
    from scipy.stats import t
    return float(t.ppf(0.975, df))


def t_test_from_interval(lo, hi, n):
    """(mean, two-sided p) of the one-sample t-test of mean 0, from a 95% t-interval [lo, hi] over n
    values as the C++ tools print it (mean +- student_t975_cpp(n - 1) * sd / sqrt(n)). (nan, nan)
    without an interval (n < 2 or NaN bounds)."""
    from scipy.stats import t
    if n < 2 or math.isnan(lo) or math.isnan(hi):
        return math.nan, math.nan
    mean = (lo + hi) / 2
    se = (hi - lo) / 2 / student_t975_cpp(n - 1)
    if se <= 0:
        return mean, (1.0 if mean == 0 else 0.0)
    return mean, float(2 * t.sf(abs(mean) / se, n - 1))
