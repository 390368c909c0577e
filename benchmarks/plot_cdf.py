#!/usr/bin/python3
"""plot_cdf.py - latency CDF of every path in an rk-bench JSON record.

    /usr/bin/python3 benchmarks/plot_cdf.py RESULTS.json [OUT.png]

Reads each result's "samples_ns" (rk-bench writes them in gpu mode, or with
--samples) and draws one cumulative distribution per path on a log time
axis, with the p50 of each in the legend. Needs matplotlib (Debian:
python3-matplotlib)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    src = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else src.rsplit(".", 1)[0] + "_cdf.png"
    with open(src) as f:
        rec = json.load(f)
    fig, ax = plt.subplots(figsize=(9, 5.5))
    n = 0
    for r in rec.get("results", []):
        s = r.get("samples_ns")
        if not s:
            continue
        xs = sorted(v / 1000.0 for v in s)
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        ax.plot(xs, ys, label="%s (p50 %.2f us)" % (r["name"], r.get("p50_ns", 0) / 1000.0), linewidth=1.4)
        n += 1
    if not n:
        sys.exit("no samples_ns in %s (run rk-bench with --samples)" % src)
    dev = rec.get("device") or {}
    ax.set_xscale("log")
    ax.set_xlabel("round trip (us, log scale)")
    ax.set_ylabel("fraction of round trips")
    ax.set_ylim(0, 1.0)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title("rk-bench %s: %s, driver %s, CUDA %s, %s"
                 % (rec.get("mode", ""), dev.get("name", "?"), dev.get("driver", "?"), dev.get("cuda", "?"),
                    rec.get("commit", "")), fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(out)


if __name__ == "__main__":
    main()
