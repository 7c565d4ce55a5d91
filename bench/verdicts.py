"""verdicts.py - the findings F1-F8 of Fernandez et al. (docs/report.md) decided
from measured numbers by code, with the thresholds stated in THRESHOLDS and quoted
in the report text. Each function returns (verdict, reason): "holds", "does not
hold" or "inconclusive (within noise)" / "inconclusive" (for a reason other than
noise), the reason giving the numbers.

Every quantity a verdict rests on is an estimate over the sweep's rounds with its
interval (bench/studydata.py: a ratio of two points is taken round by round). A
verdict is "holds" or "does not hold" only when the interval of each quantity it
uses is clear of its threshold, on the side the verdict needs; when an interval
overlaps a threshold the verdict is "inconclusive (within noise)" and says which.
So two runs whose intervals overlap cannot give opposite verdicts (tests/test_report.py
checks this on synthetic sweeps), and the same rows always give the same verdict.
Inputs are plain dicts, {batch: {round: ms}}, so tests can feed synthetic data.
"""
import math

import studydata as sd

HOLDS, NOT, INCON = "holds", "does not hold", "inconclusive"
NOISE = "inconclusive (within noise)"
VERDICTS = (HOLDS, NOT, INCON, NOISE)

THRESHOLDS = {
    # F1, F7: a batch is on the framework-bound plateau while its latency stays
    # within this factor of batch 1 (the paper-data indicator of the paper's Figure 2)
    "plateau_factor": 1.25,
    # F1: "flat at small batch" needs the plateau to reach at least this batch
    "plateau_min_batch": 4,
    # F2, F8: a mode is faster than another when the ratio of latencies is at least this
    "faster_ratio": 1.05,
    # F3: doubling the width is "nearly free" below this latency ratio, clearly not above the second
    "width_free": 1.25,
    "width_costly": 1.5,
    # F4: "near-constant cost per layer": the linear fit of latency against depth explains
    # at least this share of the variance (R^2); below the second it does not
    "depth_r2": 0.95,
    "depth_r2_fail": 0.8,
    # F5, F6: "not faster" / "slower" with this tolerance for noise
    "not_faster": 0.95,
    "slower": 1.05,
    # F8: the static advantage (graph / static - 1) "vanishes" below this at the largest batch
    "vanish": 0.05,
    "advantage": 0.10,
    # the gap split: a part "dominates" a gap when its share of the gap is above this
    "dominates": 0.5,
    # ftengine's modes against the frameworks (bench/report_peers.py): X is "at or below"
    # Y while the interval of X/Y stays at or below this, "above" when it is wholly past it
    "not_slower": 1.05,
}
T = THRESHOLDS


def ci_text(e, digits=2, unit="x"):
    """"2.36x [2.30, 2.41]" (the interval's coverage is stated once per report)."""
    if e is None:
        return "n/a"
    return e.fmt(digits, unit=unit)


def plateau_bounds(curve_rounds):
    """(surely, possibly, ratios): the plateau of an eager curve {batch: {round: ms}}
    from batch 1, surely (every batch up to it has its ratio-to-batch-1 interval
    within plateau_factor) and possibly (no batch up to it is surely outside);
    ratios {batch: Est}. None, None, {} without batch 1."""
    if 1 not in curve_rounds:
        return None, None, {}
    base = curve_rounds[1]
    ratios = {b: sd.ratio(curve_rounds[b], base) for b in sorted(curve_rounds)}
    f = T["plateau_factor"]
    surely = possibly = 1
    sure_run = poss_run = True
    for b in sorted(curve_rounds):
        r = ratios[b]
        if b == 1 or r is None:
            continue
        if sure_run and r.has_ci and r.hi <= f:
            surely = b
        else:
            sure_run = False
        if poss_run and not (r.has_ci and r.lo > f):
            possibly = b
        else:
            poss_run = False
    return surely, possibly, ratios


def plateau(curve_rounds):
    """The median-based plateau (for text): the largest batch whose median ratio to
    batch 1 stays within plateau_factor, every smaller batch too."""
    if 1 not in curve_rounds:
        return None
    last = 1
    for b in sorted(curve_rounds):
        r = sd.ratio(curve_rounds[b], curve_rounds[1])
        if r is not None and r.med <= T["plateau_factor"]:
            last = b
        else:
            break
    return last


def f1(curve_rounds):
    """F1: eager latency flat in batch size at small batch, then growing."""
    small = [b for b in curve_rounds if b <= T["plateau_min_batch"]]
    if 1 not in curve_rounds or len(small) < 3:
        return INCON, "needs eager latencies at batch 1 and at least two more batches up to %d" % T["plateau_min_batch"]
    surely, possibly, ratios = plateau_bounds(curve_rounds)
    if not ratios[1] or not ratios[1].has_ci:
        return INCON, "needs at least two rounds (an interval) per point"
    top = max(curve_rounds)
    nums = "latency relative to batch 1: %s" % ", ".join(
        "b%d %s" % (b, ci_text(ratios[b])) for b in sorted(ratios) if b != 1 and ratios[b])
    need = T["plateau_min_batch"]
    if surely >= need:
        more = "" if surely < top else "; no growth seen within the batches measured"
        return HOLDS, "every interval up to batch %d is within %.2fx of batch 1 (%s%s)" % (
            surely, T["plateau_factor"], nums, more)
    if possibly < need:
        nxt = min(b for b in curve_rounds if b > possibly)
        return NOT, "latency leaves the %.2fx band of batch 1 at batch %d, its whole interval above it (%s)" % (
            T["plateau_factor"], nxt, nums)
    return NOISE, "the plateau reaches batch %d surely and batch %d possibly: an interval overlaps %.2fx (%s)" % (
        surely, possibly, T["plateau_factor"], nums)


def _order(e, thr):
    """'a' (clearly >= thr), 'b' (clearly < 1/thr), 'n' (overlaps either)."""
    if e is None or not e.has_ci:
        return None
    if e.above(thr):
        return "a"
    if e.below(1 / thr):
        return "b"
    return "n"


def f2(eager, graph, static, static_is_graph=False):
    """F2: at batch 1 eager > graph > static; the gaps shrink as batch grows.
    Arguments {batch: {round: ms}} of one sweep (paired by round)."""
    if 1 not in eager or 1 not in graph or (not static_is_graph and 1 not in static):
        return INCON, "needs eager, graph and static latencies at batch 1"
    eg = sd.ratio(eager[1], graph[1])
    common = sorted(set(eager) & set(graph))
    top = common[-1]
    if eg is None or not eg.has_ci:
        return INCON, "needs at least two rounds (an interval) per point"
    ratio_rounds = {b: {r: eager[b][r] / graph[b][r] for r in set(eager[b]) & set(graph[b]) if graph[b][r]}
                    for b in common}
    shrink = sd.ratio(ratio_rounds[top], ratio_rounds[1]) if top != 1 else None
    nums = "eager/graph %s at batch 1, %s at batch %d" % (ci_text(eg), ci_text(sd.ratio(eager[top], graph[top])), top)
    fr = T["faster_ratio"]
    o_eg = _order(eg, fr)
    if o_eg == "b":
        return NOT, "graph mode is slower than eager at batch 1, its whole interval below 1/%.2f (%s)" % (fr, nums)
    if static_is_graph:
        return INCON, ("%s; static mode has no CUDA Graph on this device (it runs the graph plan), "
                       "so graph > static cannot be measured" % nums)
    gs = sd.ratio(graph[1], static[1])
    o_gs = _order(gs, fr)
    nums += ", graph/static %s at batch 1" % ci_text(gs)
    if shrink is not None:
        nums += "; the eager/graph ratio at batch %d over batch 1's: %s" % (top, ci_text(shrink))
    if o_gs == "b":
        return NOT, "static is slower than graph at batch 1, its whole interval below 1/%.2f (%s)" % (fr, nums)
    if o_eg == "a" and o_gs == "a" and shrink is not None:
        if shrink.below(1.0):
            return HOLDS, "%s: both orderings clear of %.2fx and the eager gap shrinks with batch" % (nums, fr)
        if shrink.above(1.0):
            return NOT, "%s: the orderings hold but the eager gap does not shrink with batch" % nums
    return NOISE, "an interval overlaps its threshold (%.2fx for the orderings, 1 for the shrink): %s" % (fr, nums)


def f3(base, wide, batch=1):
    """F3: doubling hidden/FFN width is nearly free at small batch. {batch: {round: ms}},
    both models in the same rounds."""
    if batch not in base or batch not in wide:
        return INCON, "needs both models at batch %d" % batch
    r = sd.ratio(wide[batch], base[batch])
    if r is None or not r.has_ci:
        return INCON, "needs at least two rounds of both models"
    nums = "wide/base latency %s at batch %d" % (ci_text(r), batch)
    if r.hi <= T["width_free"]:
        return HOLDS, "%s (the whole interval <= %.2fx: nearly free)" % (nums, T["width_free"])
    if r.lo >= T["width_costly"]:
        return NOT, "%s (the whole interval >= %.2fx: the extra MACs are paid)" % (nums, T["width_costly"])
    if r.lo > T["width_free"] and r.hi < T["width_costly"]:
        return INCON, "%s: between %.2fx and %.2fx, neither free nor paid in full" % (
            nums, T["width_free"], T["width_costly"])
    return NOISE, "%s: the interval overlaps %.2fx or %.2fx" % (nums, T["width_free"], T["width_costly"])


def linfit(xs, ys):
    """Least squares y = a + b x; returns (a, b, r2)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    b = sxy / sxx if sxx else 0.0
    a = my - b * mx
    ss = sum((y - my) ** 2 for y in ys)
    res = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys))
    r2 = 1 - res / ss if ss > 0 else 1.0
    return a, b, r2


def depth_fits(by_layers):
    """Per round, the line through {layers: {round: ms}}: (Est of R^2, Est of the
    slope, Est of the intercept, the median-fit (a, b))."""
    xs = sorted(by_layers)
    common = set.intersection(*(set(by_layers[x]) for x in xs)) if xs else set()
    fits = [linfit(xs, [by_layers[x][r] for x in xs]) for r in sorted(common)]
    r2 = sd.estimate([f[2] for f in fits])
    slope = sd.estimate([f[1] for f in fits])
    icpt = sd.estimate([f[0] for f in fits])
    return r2, slope, icpt


def f4(by_layers):
    """F4: depth adds a near-constant cost per layer at batch 1. by_layers: {layers: {round: ms}},
    every depth in the same rounds (one fit per round)."""
    if len(by_layers) < 3:
        return INCON, "needs at least three depths at batch 1"
    r2, slope, icpt = depth_fits(by_layers)
    if r2 is None or not r2.has_ci:
        return INCON, "needs at least two rounds in which every depth was measured"
    xs = sorted(by_layers)
    nums = "a line per round over %s layers: %s ms per layer + %s ms, R^2 %s" % (
        "/".join(str(x) for x in xs), slope.fmt(3), icpt.fmt(3), r2.fmt(3))
    if slope.hi <= 0:
        return NOT, "latency does not grow with depth (%s)" % nums
    if r2.lo >= T["depth_r2"] and slope.lo > 0:
        return HOLDS, "%s (the R^2 interval >= %.2f)" % (nums, T["depth_r2"])
    if r2.hi < T["depth_r2_fail"]:
        return NOT, "%s (the R^2 interval < %.2f)" % (nums, T["depth_r2_fail"])
    if r2.lo >= T["depth_r2_fail"] and r2.hi < T["depth_r2"]:
        return INCON, "%s, between %.2f and %.2f" % (nums, T["depth_r2_fail"], T["depth_r2"])
    return NOISE, "%s: an interval overlaps %.2f, %.2f or 0" % (nums, T["depth_r2_fail"], T["depth_r2"])


def slower_than_bert(name, lat, bert_lat, macs, bert_macs, want, ref="BERT"):
    """F5 (want='not faster') and F6 (want='slower'): a model with fewer MACs than the
    reference (BERT, or another of its panel: ref names it) at small batch. lat/bert_lat:
    {batch: {round: ms}} measured in the same rounds."""
    common = sorted(set(lat) & set(bert_lat))
    if not common:
        return INCON, "needs %s and %s at a common small batch" % (name, ref)
    b = common[0]
    r = sd.ratio(lat[b], bert_lat[b])
    if r is None or not r.has_ci:
        return INCON, "needs %s and %s in at least two common rounds" % (name, ref)
    mr = ("%.2fx fewer MACs" % (bert_macs / macs)) if macs and bert_macs and macs > 0 else "MACs unknown"
    nums = "%s/%s latency %s at batch %d with %s" % (name, ref, ci_text(r), b, mr)
    if macs and bert_macs and macs >= bert_macs:
        return INCON, "%s: it does not have fewer MACs here, so the claim has no test" % nums
    if want == "slower":
        if r.lo >= T["slower"]:
            return HOLDS, "%s (the whole interval >= %.2fx)" % (nums, T["slower"])
        if r.hi <= 1 / T["slower"]:
            return NOT, "%s (it is faster: the whole interval <= 1/%.2f)" % (nums, T["slower"])
        if r.lo > 1 / T["slower"] and r.hi < T["slower"]:
            return INCON, "%s: within the %.2fx band, neither slower nor faster" % (nums, T["slower"])
        return NOISE, "%s: the interval overlaps %.2fx or 1/%.2f" % (nums, T["slower"], T["slower"])
    if r.lo >= T["not_faster"]:
        return HOLDS, "%s (the whole interval >= %.2fx: not faster)" % (nums, T["not_faster"])
    if r.hi < T["not_faster"]:
        return NOT, "%s (the whole interval < %.2fx: faster, as its MACs suggest)" % (nums, T["not_faster"])
    return NOISE, "%s: the interval overlaps %.2fx" % (nums, T["not_faster"])


def not_faster_panel(pairs):
    """F5 over a panel: pairs [(model, reference, (verdict, reason))] of slower_than_bert(...,
    'not faster'). The claim "efficient models are not faster than the references at small
    batch" holds when every tested pair holds, does not hold when any pair is clearly
    faster (a counterexample), and is within noise otherwise. A pair without fewer MACs
    or not measured (inconclusive) is no test of it."""
    tested = [(m, r, v) for m, r, (v, _) in pairs if v != INCON]
    untested = ["%s/%s" % (m, r) for m, r, (v, _) in pairs if v == INCON]
    nums = "; ".join("%s: %s" % (v if v != NOISE else "within noise", why) for _, _, (v, why) in pairs
                     if v != INCON)
    note = (" (no test: %s)" % ", ".join(untested)) if untested else ""
    if not tested:
        return INCON, "no efficient model with fewer MACs than a reference was measured%s" % note
    faster = ["%s/%s" % (m, r) for m, r, v in tested if v == NOT]
    if faster:
        return NOT, "clearly faster: %s. %s%s" % (", ".join(faster), nums, note)
    if all(v == HOLDS for _, _, v in tested):
        return HOLDS, "every model clearly not faster. %s%s" % (nums, note)
    return NOISE, "no model clearly faster, some within noise. %s%s" % (nums, note)


def f7(fp16, fp32, measurable=True, why=""):
    """F7: fp16 stays framework-bound up to a larger batch than fp32 ({batch: {round: ms}})."""
    if not measurable:
        return INCON, why
    s16, p16, _ = plateau_bounds(fp16)
    s32, p32, _ = plateau_bounds(fp32)
    if s16 is None or s32 is None:
        return INCON, "needs fp16 and fp32 eager curves from batch 1"
    nums = "plateau (<= %.2fx batch 1) surely to batch %d, possibly to %d in fp16; surely %d, possibly %d in fp32" % (
        T["plateau_factor"], s16, p16, s32, p32)
    if s16 > p32:
        return HOLDS, nums
    if p16 == p32 == s16 == s32 == max(fp16) == max(fp32):
        return INCON, nums + ": both flat over every batch measured"
    if p16 <= s32:
        return NOT, nums
    return NOISE, nums + ": the plateaus' ranges overlap"


def f8(graph, static, static_is_graph=False):
    """F8: the static (CUDA Graph) advantage over graph mode vanishes at large batch."""
    if static_is_graph:
        return INCON, "static mode has no CUDA Graph on this device (it runs the graph plan): no advantage to vanish"
    common = sorted(set(graph) & set(static))
    if len(common) < 2 or common[0] != 1:
        return INCON, "needs graph and static latencies at batch 1 and a larger batch"
    top = common[-1]
    a1 = sd.ratio(graph[1], static[1])
    at = sd.ratio(graph[top], static[top])
    if a1 is None or at is None or not a1.has_ci or not at.has_ci:
        return INCON, "needs at least two rounds (an interval) per point"
    nums = "graph/static %s at batch 1, %s at batch %d" % (ci_text(a1), ci_text(at), top)
    adv, van = 1 + T["advantage"], 1 + T["vanish"]
    if a1.below(adv):
        return INCON, "%s: under %.0f%% at batch 1, no advantage to vanish" % (nums, 100 * T["advantage"])
    if a1.above(adv):
        if at.hi <= van:
            return HOLDS, "%s (the batch-%d interval <= %.0f%% advantage)" % (nums, top, 100 * T["vanish"])
        if at.lo > van:
            return NOT, "%s (the batch-%d interval > %.0f%% advantage)" % (nums, top, 100 * T["vanish"])
    return NOISE, "%s: an interval overlaps %.0f%% (batch 1) or %.0f%% (batch %d)" % (
        nums, 100 * T["advantage"], 100 * T["vanish"], top)


# ---- where a gap comes from ----

def gap_split(lat_a, lat_b, kern_a, kern_b):
    """The gap between two modes of one sweep at one batch, round by round: latency
    difference a - b, its kernel-time part (the profiled pass's busy time, a - b) and
    its dispatch/host part (the rest), and the kernel part's share of the gap.
    Arguments {round: ms}. Returns dict(gap, kernel, host, share) of Est (None where
    not measured)."""
    rs = sorted(set(lat_a) & set(lat_b) & set(kern_a) & set(kern_b))
    gap = sd.estimate([lat_a[r] - lat_b[r] for r in rs])
    kern = sd.estimate([kern_a[r] - kern_b[r] for r in rs])
    host = sd.estimate([(lat_a[r] - lat_b[r]) - (kern_a[r] - kern_b[r]) for r in rs])
    share = sd.estimate([(kern_a[r] - kern_b[r]) / (lat_a[r] - lat_b[r]) for r in rs if lat_a[r] != lat_b[r]])
    return {"gap": gap, "kernel": kern, "host": host, "share": share}


def dominates(split):
    """Which part dominates a gap, decided on intervals like the verdicts: 'kernel time',
    'dispatch/host time', or a sentence saying it is not clear and why."""
    gap, share = split.get("gap"), split.get("share")
    if gap is None or share is None or not gap.has_ci or not share.has_ci:
        return "not measured (needs the profiled pass, --overhead, in at least two rounds)"
    if gap.lo <= 0 <= gap.hi:
        return "no clear gap (its interval includes 0)"
    if share.lo > T["dominates"]:
        return "kernel time"
    if share.hi < T["dominates"]:
        return "dispatch/host time"
    return "neither clearly (the kernel share's interval %s overlaps %.0f%%)" % (
        split["share"].fmt(0, 100, "%"), 100 * T["dominates"])


# ---- ftengine's modes against the frameworks (bench/report_peers.py) ----
# Inputs are {round: ms} (or {batch: {round: ms}}) of runners timed in the same
# rounds of one peer run (bench/peers.py), so ratios are taken round by round.


def at_or_below(ours, theirs, what):
    """"ours is at or below theirs" ({round: value} each, paired): holds when the interval
    of ours/theirs is <= not_slower, does not hold when wholly above it."""
    r = sd.ratio(ours, theirs)
    if r is None or not r.has_ci:
        return INCON, "%s: needs both in at least two common rounds" % what
    nums = "%s %s" % (what, ci_text(r))
    t = T["not_slower"]
    if r.hi <= t:
        return HOLDS, "%s (the whole interval <= %.2fx)" % (nums, t)
    if r.lo > t:
        return NOT, "%s (the whole interval > %.2fx)" % (nums, t)
    return NOISE, "%s: the interval overlaps %.2fx" % (nums, t)


def at_or_below_every_batch(ours, theirs, what):
    """at_or_below at every batch both {batch: {round: ms}} have: holds when it holds at
    every one, does not hold when it fails clearly at any, else within noise."""
    common = sorted(set(ours) & set(theirs))
    if not common:
        return INCON, "%s: no common batch measured" % what
    vs = [(b, at_or_below(ours[b], theirs[b], "b%d" % b)) for b in common]
    nums = "%s per batch: %s" % (what, ", ".join("b%d %s" % (b, ci_text(sd.ratio(ours[b], theirs[b])))
                                                 for b in common))
    kinds = [v for _, (v, _) in vs]
    if all(v == HOLDS for v in kinds):
        return HOLDS, "%s (every interval <= %.2fx)" % (nums, T["not_slower"])
    bad = [b for b, (v, _) in vs if v == NOT]
    if bad:
        return NOT, "%s (wholly above %.2fx at batch %s)" % (nums, T["not_slower"], ", ".join(map(str, bad)))
    if any(v == INCON for v in kinds):
        return INCON, "%s: a batch lacks two common rounds" % nums
    return NOISE, "%s: an interval overlaps %.2fx" % (nums, T["not_slower"])


def both_gain(eager, graph, fw_eager, fw_graph, batch=1):
    """"graph mode gains over eager as the framework's graph runtime does over its eager
    one" at one batch ({round: ms} each): holds when both ratios eager/graph are clearly
    >= faster_ratio, does not hold when either is clearly below it."""
    ge, fe = sd.ratio(eager, graph), sd.ratio(fw_eager, fw_graph)
    if ge is None or fe is None or not ge.has_ci or not fe.has_ci:
        return INCON, "needs both pairs in at least two common rounds at batch %d" % batch
    fr = T["faster_ratio"]
    nums = "batch %d: ftengine eager/graph %s, PyTorch eager/TorchScript %s" % (batch, ci_text(ge), ci_text(fe))
    if ge.lo >= fr and fe.lo >= fr:
        return HOLDS, "%s (both intervals >= %.2fx)" % (nums, fr)
    if ge.hi < fr or fe.hi < fr:
        return NOT, "%s (%s interval below %.2fx)" % (
            nums, "ftengine's" if ge.hi < fr else "the framework's", fr)
    return NOISE, "%s: an interval overlaps %.2fx" % (nums, fr)


def gap_shrinks(slow, fast, what):
    """"the slow/fast ratio shrinks as batch grows": {batch: {round: ms}} each; the ratio at
    the largest common batch over batch 1's, round by round: holds when clearly below 1,
    does not hold when clearly at or above it."""
    common = sorted(set(slow) & set(fast))
    if len(common) < 2 or common[0] != 1:
        return INCON, "%s: needs batch 1 and a larger batch" % what
    top = common[-1]
    q = {b: {r: slow[b][r] / fast[b][r] for r in set(slow[b]) & set(fast[b]) if fast[b][r]} for b in (1, top)}
    sh = sd.ratio(q[top], q[1])
    if sh is None or not sh.has_ci:
        return INCON, "%s: needs at least two common rounds" % what
    nums = "%s %s at batch 1, %s at batch %d; their ratio %s" % (
        what, ci_text(sd.estimate(list(q[1].values()))), ci_text(sd.estimate(list(q[top].values()))), top,
        ci_text(sh))
    if sh.hi < 1.0:
        return HOLDS, "%s (clearly below 1)" % nums
    if sh.lo >= 1.0:
        return NOT, "%s (clearly at or above 1)" % nums
    return NOISE, "%s: the interval overlaps 1" % nums


def fmt(verdict, reason):
    assert verdict in VERDICTS
    return "Verdict: %s (%s)" % (verdict, reason)


def nan_safe(x):
    return x if x is not None and math.isfinite(x) else None
