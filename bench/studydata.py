"""studydata.py - reading the sweep CSVs of a report directory (bench/report.py,
bench/plot.py): rows by sweep, one value per (point, round), and the statistic
every table, figure and verdict of the study uses. No third-party modules: the
report and its tests run on a bare python3.

The statistic. `ftengine sweep` measures in interleaved rounds: each round visits
every point once, in a shuffled order. A point's value in a round is the median of
that round's timed forwards (the mean under the paper's back-to-back protocol,
which has only that). A point's latency is the median of its round values, and its
interval is the distribution-free confidence interval of that median from the
rounds' order statistics: [x(k), x(n+1-k)] of the n sorted round values, k the
largest with coverage 1 - 2 P(Binomial(n, 1/2) <= k - 1) >= 95% (k = 1, the whole
range, when n is too small for 95%; the coverage reached is reported). The same
rule is tools/stats.c's, so `sweep`'s summary and the report agree. A comparison of
two points measured in the same rounds (two modes, two models of one sweep) is
taken round by round (a paired ratio or difference), so a change of host load that
hits both cancels, and gets its interval the same way. The rule is deterministic:
the same rows give the same numbers and verdicts.
"""
import csv
import math
import os


def fnum(s):
    """A CSV number, or None for an empty field (not measured)."""
    if s is None or s == "":
        return None
    try:
        v = float(s)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


PROFILED = "profiled"  # the protocol of a deferred profiled pass's row (tools/sweep_csv.c)
PROFILE_COLS = ("overhead_ms", "overhead_share", "profiled_ms", "busy_ms", "dispatch_ms")


def _point_key(r):
    return tuple(r.get(k, "") for k in ("model", "mode", "batch", "length", "op_cost_us", "step_cost_us", "round"))


def join_profiled(rows):
    """A sweep that profiles on CUDA with CUPTI writes each (point, round) as two rows: the
    visit's (the latency) and, after every timed visit, its profiled pass's (protocol
    "profiled": the overhead columns only). Returns the rows as one per (point, round),
    each visit's row given its profiled pass's columns (and its kernel count where the
    visit had none); a failed profiled pass stays a row of its own (its status and
    error say so), one without its visit is dropped."""
    if not any(r.get("protocol") == PROFILED for r in rows):
        return rows
    visits = {}
    for r in rows:
        if r.get("protocol") != PROFILED:
            visits.setdefault(_point_key(r), r)
    out = []
    for r in rows:
        if r.get("protocol") != PROFILED:
            out.append(r)
            continue
        v = visits.get(_point_key(r))
        if r.get("status") != "ok":
            out.append(r)
        elif v is not None:
            for c in PROFILE_COLS:
                v[c] = r.get(c, "")
            if not v.get("kernels_per_forward"):
                v["kernels_per_forward"] = r.get("kernels_per_forward", "")
    return out


def read_rows(path):
    """Every row of a sweep CSV as a dict, one per (point, round) (join_profiled); an
    absent file gives []."""
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return join_profiled(list(csv.DictReader(f)))


# ---- the statistic ----

WANT = 0.95  # the coverage asked of every interval


def median(xs):
    s = sorted(xs)
    n = len(s)
    if not n:
        return None
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _binom_cdf_half(n, j):
    return sum(math.comb(n, i) for i in range(0, min(j, n) + 1)) / 2.0 ** n


def ci_rank(n, want=WANT):
    """(k, level): the order-statistic interval [x(k), x(n+1-k)] for the median of n
    samples, the largest k with coverage >= want (else k = 1), and its coverage.
    k = 0 for n < 2 (no interval)."""
    if n < 2:
        return 0, 0.0
    best, level = 1, 1 - 2 * _binom_cdf_half(n, 0)
    k = 2
    while 2 * k <= n + 1:
        c = 1 - 2 * _binom_cdf_half(n, k - 1)
        if c < want:
            break
        best, level = k, c
        k += 1
    return best, level


class Est:
    """A median over rounds with its interval: med, lo, hi (None without an interval),
    level (the interval's coverage), n (rounds)."""
    __slots__ = ("med", "lo", "hi", "level", "n")

    def __init__(self, med, lo, hi, level, n):
        self.med, self.lo, self.hi, self.level, self.n = med, lo, hi, level, n

    @property
    def has_ci(self):
        return self.lo is not None

    def above(self, t):
        """The whole interval is at or above t."""
        return self.has_ci and self.lo >= t

    def below(self, t):
        """The whole interval is below t."""
        return self.has_ci and self.hi < t

    def fmt(self, digits=3, scale=1.0, unit=""):
        f = "%%.%df" % digits
        if self.med is None:
            return "-"
        s = (f % (self.med * scale)) + unit
        if self.has_ci:
            s += (" [" + f + ", " + f + "]") % (self.lo * scale, self.hi * scale)
        return s

    def __repr__(self):
        return "Est(%r, %r, %r, %r, %r)" % (self.med, self.lo, self.hi, self.level, self.n)


def estimate(values):
    """Est of a list of round values (None entries dropped); None when empty."""
    v = sorted(x for x in values if x is not None and math.isfinite(x))
    if not v:
        return None
    k, level = ci_rank(len(v))
    lo, hi = (v[k - 1], v[len(v) - k]) if k else (None, None)
    return Est(median(v), lo, hi, level, len(v))


# ---- rows ----

def round_value(row):
    """A row's value for its round: the median of its timed forwards, or the mean
    under the paper protocol (which has no median)."""
    v = fnum(row.get("median_ms"))
    return v if v is not None else fnum(row.get("mean_ms"))


def round_of(row):
    r = row.get("round")
    try:
        return int(r) if r not in (None, "") else 0  # a CSV from before rounds: one round
    except ValueError:
        return 0


def ok_rows(rows):
    return [r for r in rows if r.get("status") == "ok" and round_value(r) is not None]


def _same_cost(field, want):
    if want is None:
        return True
    v = fnum(field)
    return v is not None and abs(v - want) < 1e-9


def select(rows, mode=None, model=None, op_cost=None, step_cost=None, batch=None):
    """The ok rows of one mode / model / emulated cost / batch (None: any)."""
    out = []
    for r in ok_rows(rows):
        if mode is not None and r.get("mode") != mode:
            continue
        if model is not None and r.get("model") != model:
            continue
        if not _same_cost(r.get("op_cost_us"), op_cost) or not _same_cost(r.get("step_cost_us"), step_cost):
            continue
        if batch is not None and int(r["batch"]) != batch:
            continue
        out.append(r)
    return out


def rounds(rows, mode=None, key=round_value, **filt):
    """{batch: {round: value}} of the selected rows (the first row of a round wins)."""
    out = {}
    for r in select(rows, mode=mode, **filt):
        v = key(r)
        if v is None:
            continue
        out.setdefault(int(r["batch"]), {}).setdefault(round_of(r), v)
    return out


def curve(rows, mode=None, key=round_value, **filt):
    """{batch: Est} over rounds."""
    return {b: estimate(list(rv.values())) for b, rv in rounds(rows, mode, key, **filt).items()}


def min_curve(rows, mode=None, **filt):
    """{batch: the fastest forward of any round} (min_ms; the paper protocol: the lowest mean)."""
    out = {}
    for r in select(rows, mode=mode, **filt):
        v = fnum(r.get("min_ms"))
        v = v if v is not None else fnum(r.get("mean_ms"))
        if v is not None:
            b = int(r["batch"])
            out[b] = min(out.get(b, v), v)
    return out


def paired(a, b, f):
    """Est of f(a[r], b[r]) over the rounds both {round: value} dicts have."""
    return estimate([f(a[r], b[r]) for r in sorted(set(a) & set(b)) if a[r] is not None and b[r] is not None])


def ratio(a, b):
    """Est of the per-round ratio a/b (two points measured in the same rounds)."""
    return paired(a, b, lambda x, y: x / y if y else None)


def first_value(rows, key, **filt):
    """key(row) of the first selected row with a value (MACs, params, length)."""
    for r in select(rows, **filt):
        v = key(r)
        if v is not None:
            return v
    return None


def kernel_ms(row):
    """Kernel time per forward: the profiled pass's device-busy time (CPU: the kernels'
    launch phases; CUDA: CUPTI's kernel, copy and memset union)."""
    return fnum(row.get("busy_ms"))


def host_ms(row):
    """Dispatch/host time per forward: the round's latency less its kernel time."""
    lat, k = round_value(row), kernel_ms(row)
    return lat - k if lat is not None and k is not None else None
