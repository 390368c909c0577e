#!/usr/bin/python3
"""test_plot_cdf.py - plot_cdf.py renders a committed rk-bench record, and
reads records whose rows lack fields (missing or null), without a "?".

    /usr/bin/python3 benchmarks/test_plot_cdf.py PLOT_CDF.py RECORD.json

Exit 0 (pass), 1 (fail), 77 (skip: no matplotlib)."""
import gzip
import importlib.util
import os
import struct
import sys
import tempfile

try:
    import matplotlib  # noqa: F401
except ImportError:
    print("SKIP: matplotlib is missing (Debian: python3-matplotlib)")
    sys.exit(77)

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def png_size(path):
    """(width, height) of a PNG, or None when the file is no PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def main(script, record):
    spec = importlib.util.spec_from_file_location("plot_cdf", script)
    plot_cdf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot_cdf)
    rec = plot_cdf.load_record(record)
    with tempfile.TemporaryDirectory(prefix="rk-plot-") as tmp:
        # a record stored gzip'd reads the same, by either name
        gz = os.path.join(tmp, "rec.json.gz")
        with open(record, "rb") as f, gzip.open(gz, "wb") as g:
            g.write(f.read())
        check(plot_cdf.load_record(gz) == rec, "a gzip'd record reads as the plain one")
        check(plot_cdf.load_record(gz[:-3]) == rec, "NAME.json finds NAME.json.gz")
        return checks(plot_cdf, rec, tmp)


def checks(plot_cdf, rec, tmp):
    # a committed GPU record: every latency path with samples is drawn
    out = os.path.join(tmp, "gpu.png")
    with_samples = [r for r in rec["results"] if r.get("samples_ns")]
    n = plot_cdf.plot(rec, out)
    check(n == len(with_samples) and n > 0, "%d of %d paths with samples drawn" % (n, len(with_samples)))
    size = png_size(out) if os.path.exists(out) else None
    check(size is not None and size[0] >= 800 and size[1] >= 500, "a PNG of at least 800 x 500 (%s)" % (size,))
    check(os.path.exists(out) and os.path.getsize(out) > 20000, "the PNG is not trivial (%d bytes)"
          % (os.path.getsize(out) if os.path.exists(out) else 0))
    t = plot_cdf.title(rec)
    check(rec["device"]["name"] in t and rec["host"]["cpu"] in t and "?" not in t,
          "the title names the GPU and the host, no '?': %r" % t)

    # what rk-bench writes for rows that lack fields, and what older records
    # hold: fields missing or null, a throughput row, no device, no CPU name
    odd = {"tool": "rk-bench", "mode": "ring", "host": {"cpu": "unknown", "cores": 2}, "device": None,
           "results": [
               {"name": "throughput_echo_64", "backend": "cpu", "count": 1000, "msgs_per_s": 2.5e6},
               {"name": "ring_echo_64", "backend": "cpu", "count": 4, "p50_ns": 2000, "p99_ns": None,
                "samples_ns": [1000, 2000, 3000, 40000]},
               {"name": "bridge_ring", "backend": "cpu", "p90_ns": None, "samples_ns": [5000, 6000, None]}]}
    t = plot_cdf.title(odd)
    check("?" not in t and "unknown" not in t and "None" not in t and "2 cores" in t,
          "a record without device or CPU name: %r" % t)
    paths = plot_cdf.paths(odd)
    check([p[0] for p in paths] == ["ring_echo_64", "bridge_ring"], "rows without samples are left out")
    check(paths and paths[0][2]["p50"] == 2.0 and paths[0][2]["p99"] == 40.0,
          "the record's p50, the samples' p99 where the record has null: %s" % (paths and paths[0][2],))
    out = os.path.join(tmp, "odd.png")
    check(plot_cdf.plot(odd, out) == 2 and png_size(out) is not None, "a record with missing and null fields plots")
    check(plot_cdf.plot({"results": [odd["results"][0]]}, os.path.join(tmp, "none.png")) == 0,
          "a record without samples draws nothing")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
