"""verdicts.py - the findings F1-F8 of Fernandez et al. (docs/report.md) decided
from measured numbers by code, with the thresholds stated in THRESHOLDS and
quoted in the report text. Each function returns (verdict, reason) where verdict
is "holds", "does not hold" or "inconclusive". Pure functions of plain dicts and
numbers, so tests/test_report.py can feed them synthetic curves.
"""
import math

HOLDS, NOT, INCON = "holds", "does not hold", "inconclusive"

THRESHOLDS = {
    # F1, F7: a batch is on the framework-bound plateau while its latency stays
    # within this factor of batch 1 (the paper-data indicator of specs/paper.md 2.6)
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
}
T = THRESHOLDS


def plateau(curve):
    """The largest batch up to which every latency is within plateau_factor of batch 1
    (None without a batch-1 point)."""
    if 1 not in curve:
        return None
    base = curve[1]
    last = 1
    for b in sorted(curve):
        if curve[b] <= T["plateau_factor"] * base:
            last = b
        else:
            break
    return last


def f1(curve):
    """F1: eager latency flat in batch size at small batch, then growing."""
    small = [b for b in curve if b <= T["plateau_min_batch"]]
    if 1 not in curve or len(small) < 3:
        return INCON, "needs eager latencies at batch 1 and at least two more batches up to %d" % T["plateau_min_batch"]
    p = plateau(curve)
    top = max(curve)
    grow = curve[top] / curve[1]
    tail = "; at batch %d latency is %.2fx batch 1" % (top, grow)
    if p >= T["plateau_min_batch"]:
        more = "" if p < top else " (no growth seen within the batches measured)"
        return HOLDS, "latency stays within %.2fx of batch 1 up to batch %d%s%s" % (
            T["plateau_factor"], p, tail, more)
    nxt = min(b for b in curve if b > p)
    return NOT, "latency leaves the %.2fx band of batch 1 already at batch %d (%.2fx)%s" % (
        T["plateau_factor"], nxt, curve[nxt] / curve[1], tail)


def f2(eager, graph, static, static_is_graph=False):
    """F2: at batch 1 eager > graph > static; the gaps shrink as batch grows."""
    if 1 not in eager or 1 not in graph or (not static_is_graph and 1 not in static):
        return INCON, "needs eager, graph and static latencies at batch 1"
    eg = eager[1] / graph[1]
    common = sorted(set(eager) & set(graph))
    top = common[-1]
    eg_top = eager[top] / graph[top]
    shrink = eg_top < eg
    nums = "eager/graph %.2fx at batch 1, %.2fx at batch %d" % (eg, eg_top, top)
    if eg < 1 / T["faster_ratio"]:
        return NOT, "graph mode is slower than eager at batch 1 (%s)" % nums
    if static_is_graph:
        return INCON, ("%s; static mode has no CUDA Graph on this device (it runs the graph plan), "
                       "so graph > static cannot be measured" % nums)
    gs = graph[1] / static[1]
    nums += ", graph/static %.2fx at batch 1" % gs
    if eg >= T["faster_ratio"] and gs >= T["faster_ratio"]:
        if shrink:
            return HOLDS, "%s; the eager gap shrinks with batch" % nums
        return NOT, "%s; but the eager gap does not shrink with batch" % nums
    if gs < 1 / T["faster_ratio"]:
        return NOT, "static is slower than graph at batch 1 (%s)" % nums
    return INCON, "an ordering within the %.2fx noise band (%s)" % (T["faster_ratio"], nums)


def f3(base, wide, batch=1):
    """F3: doubling hidden/FFN width is nearly free at small batch."""
    if batch not in base or batch not in wide:
        return INCON, "needs both models at batch %d" % batch
    r = wide[batch] / base[batch]
    nums = "wide/base latency %.2fx at batch %d" % (r, batch)
    if r <= T["width_free"]:
        return HOLDS, "%s (<= %.2fx: nearly free)" % (nums, T["width_free"])
    if r >= T["width_costly"]:
        return NOT, "%s (>= %.2fx: the extra MACs are paid)" % (nums, T["width_costly"])
    return INCON, "%s, between %.2fx and %.2fx" % (nums, T["width_free"], T["width_costly"])


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


def f4(by_layers):
    """F4: depth adds a near-constant cost per layer at batch 1. by_layers: {layers: ms}."""
    if len(by_layers) < 3:
        return INCON, "needs at least three depths at batch 1"
    xs = sorted(by_layers)
    a, b, r2 = linfit(xs, [by_layers[x] for x in xs])
    nums = "linear fit over %s layers: %.3f ms per layer + %.3f ms, R^2 %.3f" % (
        "/".join(str(x) for x in xs), b, a, r2)
    if b <= 0:
        return NOT, "latency does not grow with depth (%s)" % nums
    if r2 >= T["depth_r2"]:
        return HOLDS, "%s (>= %.2f)" % (nums, T["depth_r2"])
    if r2 < T["depth_r2_fail"]:
        return NOT, "%s (< %.2f)" % (nums, T["depth_r2_fail"])
    return INCON, "%s, between %.2f and %.2f" % (nums, T["depth_r2_fail"], T["depth_r2"])


def slower_than_bert(name, lat, bert_lat, macs, bert_macs, want):
    """F5 (want='not faster') and F6 (want='slower'): a model with fewer MACs than BERT
    at small batch. lat/bert_lat: {batch: ms}."""
    common = sorted(set(lat) & set(bert_lat))
    if not common:
        return INCON, "needs %s and BERT at a common small batch" % name
    b = common[0]
    r = lat[b] / bert_lat[b]
    mr = ("%.2fx fewer MACs" % (bert_macs / macs)) if macs and bert_macs and macs > 0 else "MACs unknown"
    nums = "%s/BERT latency %.2fx at batch %d with %s" % (name, r, b, mr)
    if macs and bert_macs and macs >= bert_macs:
        return INCON, "%s: it does not have fewer MACs here, so the claim has no test" % nums
    if want == "slower":
        if r >= T["slower"]:
            return HOLDS, "%s (>= %.2fx)" % (nums, T["slower"])
        if r <= 1 / T["slower"]:
            return NOT, "%s (it is faster)" % nums
        return INCON, "%s, within the %.2fx noise band" % (nums, T["slower"])
    if r >= T["not_faster"]:
        return HOLDS, "%s (>= %.2fx: not faster)" % (nums, T["not_faster"])
    return NOT, "%s (< %.2fx: faster, as its MACs suggest)" % (nums, T["not_faster"])


def f7(fp16, fp32, measurable=True, why=""):
    """F7: fp16 stays framework-bound up to a larger batch than fp32."""
    if not measurable:
        return INCON, why
    p16, p32 = plateau(fp16), plateau(fp32)
    if p16 is None or p32 is None:
        return INCON, "needs fp16 and fp32 eager curves from batch 1"
    nums = "plateau (<= %.2fx batch 1) to batch %d in fp16, %d in fp32" % (T["plateau_factor"], p16, p32)
    if p16 > p32:
        return HOLDS, nums
    if p16 == p32 == max(fp16) == max(fp32):
        return INCON, nums + ": both flat over every batch measured"
    return NOT, nums


def f8(graph, static, static_is_graph=False):
    """F8: the static (CUDA Graph) advantage over graph mode vanishes at large batch."""
    if static_is_graph:
        return INCON, "static mode has no CUDA Graph on this device (it runs the graph plan): no advantage to vanish"
    common = sorted(set(graph) & set(static))
    if len(common) < 2 or common[0] != 1:
        return INCON, "needs graph and static latencies at batch 1 and a larger batch"
    top = common[-1]
    a1 = graph[1] / static[1] - 1
    at = graph[top] / static[top] - 1
    nums = "static advantage (graph/static - 1) %.1f%% at batch 1, %.1f%% at batch %d" % (100 * a1, 100 * at, top)
    if a1 < T["advantage"]:
        return INCON, "%s: under %.0f%% at batch 1, no advantage to vanish" % (nums, 100 * T["advantage"])
    if at <= T["vanish"]:
        return HOLDS, "%s (<= %.0f%%)" % (nums, 100 * T["vanish"])
    return NOT, "%s (> %.0f%%)" % (nums, 100 * T["vanish"])


def fmt(verdict, reason):
    assert verdict in (HOLDS, NOT, INCON)
    return "Verdict: %s (%s)" % (verdict, reason)


def nan_safe(x):
    return x if x is not None and math.isfinite(x) else None
