#!/usr/bin/python3
"""plot_cdf.py - latency CDF of every path in an rk-bench JSON record.

    /usr/bin/python3 benchmarks/plot_cdf.py RESULTS.json[.gz] [OUT.png]

Reads each result's "samples_ns" (rk-bench writes them in gpu mode, or with
--samples) and draws one cumulative distribution per path: latency on a log
axis, the fraction of round trips on a logit axis (so that p99 and p99.9 are
as readable as p50), each path's p50 / p99 / p99.9 marked on its curve and
given in the legend (the record's values, from every round trip; a curve
may hold fewer samples, and says so). The title names the machine from the record's "host"
and "device". Rows without samples (throughput, bandwidth) are left out.
Fields a row lacks may be missing or null (benchmarks/results/README.md).
A record may be gzip'd (NAME.json.gz; NAME.json finds it too, as the docs
cite the large ones).
Needs matplotlib (Debian: python3-matplotlib, installed by .ci/deps)."""
import gzip
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

# the marked percentiles: (fraction, label, marker)
MARKS = ((0.5, "p50", "o"), (0.99, "p99", "^"), (0.999, "p99.9", "s"))
POINTS = 3000  # points per curve: spaced evenly on the logit axis


def _num(v):
    """v when it is a number, else None (a missing or null field)."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _known(v):
    """v when it names something (not empty, not "unknown", not null)."""
    return v if isinstance(v, str) and v.strip() and v.strip().lower() not in ("unknown", "?") else None


def machine(rec):
    """The machine of a record in words: GPU (driver, CUDA) and host CPU."""
    parts = []
    dev = rec.get("device") or {}
    name = _known(dev.get("name"))
    if name:
        extra = ", ".join(x for x in (
            "driver " + dev["driver"] if _known(dev.get("driver")) else None,
            "CUDA " + dev["cuda"] if _known(dev.get("cuda")) else None) if x)
        parts.append(name + (" (%s)" % extra if extra else ""))
    else:
        parts.append("no GPU")
    host = rec.get("host") or {}
    cpu, cores = _known(host.get("cpu")), _num(host.get("cores"))
    if cpu or cores:
        parts.append("host " + ", ".join(x for x in (cpu, "%d cores" % cores if cores else None) if x))
    return " · ".join(parts)


def title(rec):
    """Two lines: what ran (mode, commit, whether interrupted), and where."""
    head = " ".join(x for x in ("rk-bench", _known(rec.get("mode")), "round trips") if x)
    commit = _known(rec.get("commit"))
    if commit:
        head += ", commit " + commit
    if rec.get("interrupted"):
        head += " (interrupted: partial)"
    return head + "\n" + machine(rec)


def percentile(xs, q):
    """Nearest-rank percentile q (0..1) of sorted xs, as rk-bench computes it."""
    k = max(1, math.ceil(q * len(xs)))
    return xs[min(k, len(xs)) - 1]


def curve(xs):
    """(x, y) points of the CDF of sorted xs, evenly spaced in logit(y)."""
    n = len(xs)
    if n <= POINTS:
        return xs, [(i + 0.5) / n for i in range(n)]
    lo, hi = math.log(0.5 / n / (1 - 0.5 / n)), math.log((n - 0.5) / n / (0.5 / n))
    idx = sorted({min(n - 1, int(n / (1 + math.exp(-(lo + (hi - lo) * j / (POINTS - 1))))))
                  for j in range(POINTS)})
    return [xs[i] for i in idx], [(i + 0.5) / n for i in idx]


def paths(rec):
    """[(name, sorted samples in us, {label: us}, note)] of the rows with
    samples. The percentiles are the record's (from every round trip) where it
    has them, else the samples'; note says when the curve has fewer samples
    than the row counted."""
    out = []
    for r in rec.get("results") or []:
        s = [v for v in (r.get("samples_ns") or []) if _num(v) is not None]
        if not s:
            continue
        xs = sorted(v / 1000.0 for v in s)
        pct = {}
        for q, label, _ in MARKS:
            v = _num(r.get(label.replace(".", "") + "_ns"))  # the record's value, from every sample
            pct[label] = v / 1000.0 if v is not None else percentile(xs, q)
        count = _num(r.get("count"))
        note = " (curve: %d of %d)" % (len(xs), count) if count and count > len(xs) else ""
        out.append((str(r.get("name") or "unnamed"), xs, pct, note))
    return out


def _us(v, _pos=None):
    """An axis tick in us: 1, 2, 5, 10, ... 0.5."""
    return "%g" % v


def _fmt(v):
    """A latency in us with 3 significant digits (2.31, 18.7, 493)."""
    return "%.2f" % v if v < 10 else "%.1f" % v if v < 100 else "%.0f" % v


def plot(rec, out):
    """Draws the record's CDF into out (PNG); returns the number of paths."""
    ps = paths(rec)
    if not ps:
        return 0
    fig, ax = plt.subplots(figsize=(11, 7))
    colors = plt.get_cmap("tab10").colors
    nmax = max(len(p[1]) for p in ps)
    for k, (name, xs, pct, note) in enumerate(ps):
        c = colors[k % len(colors)]
        x, y = curve(xs)
        label = "%-24s p50 %6s   p99 %6s   p99.9 %6s us%s" % (name, _fmt(pct["p50"]), _fmt(pct["p99"]),
                                                             _fmt(pct["p99.9"]), note)
        ax.plot(x, y, color=c, linestyle=("-", "--", ":")[k // len(colors) % 3], linewidth=1.5, label=label)
        for q, lab, m in MARKS:
            if q < 1 - 0.5 / len(xs):
                ax.plot([pct[lab]], [q], marker=m, color=c, markersize=6, markeredgecolor="black",
                        markeredgewidth=0.6, linestyle="none")
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(_us))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("round trip (us, log scale)")
    ax.set_yscale("logit")
    top = 1 - 0.5 / nmax
    ax.set_ylim(0.01, top)
    ticks = [t for t in (0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999) if t <= top]
    names = {0.01: "p1", 0.1: "p10", 0.5: "p50", 0.9: "p90", 0.99: "p99", 0.999: "p99.9",
             0.9999: "p99.99", 0.99999: "p99.999"}
    ax.set_yticks(ticks)
    ax.set_yticklabels([names[t] for t in ticks])
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel("fraction of round trips at or below (logit scale)")
    for q, _, _ in MARKS:
        ax.axhline(q, color="grey", linewidth=0.7, linestyle="--", alpha=0.6)
    ax.grid(True, which="major", alpha=0.3)
    ax.set_title(title(rec), fontsize=10)
    # the percentile markers' key, then the paths
    for q, lab, m in MARKS:
        ax.plot([], [], marker=m, color="white", markeredgecolor="black", linestyle="none",
                label="%s of all the row's round trips" % lab)
    ax.legend(loc="upper left", bbox_to_anchor=(0, -0.1), ncol=1, frameon=False,
              prop={"family": "monospace", "size": 8.5})
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return len(ps)


def load_record(path):
    """The record at path, gzip'd or not; NAME.json is also NAME.json.gz
    (benchmarks/results/README.md: large records are stored gzip'd)."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    src = argv[1]
    base = src[:-3] if src.endswith(".gz") else src
    out = argv[2] if len(argv) > 2 else base.rsplit(".", 1)[0] + "_cdf.png"
    rec = load_record(src)
    if not plot(rec, out):
        sys.exit("no samples_ns in %s (run rk-bench with --samples)" % src)
    print(out)


if __name__ == "__main__":
    main(sys.argv)
