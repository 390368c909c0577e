#!/bin/sh
# samples/run-demo.sh - the "run it" demo: start rk-bridge on the automatic
# backend (the GPU when one passes validation, else the CPU backend), run
# rk-client, the C sample client and the Python sample client against it, printing results
# and round-trip latency, then stop the bridge with SIGTERM.
#
#   samples/run-demo.sh [BUILD_DIR]        (default: build)
#   RK_DEMO_ENDPOINT=tcp://127.0.0.1:5555 samples/run-demo.sh build
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
bridge=$build/bridge/rk-bridge
client=$build/bridge/rk-client
for f in "$bridge" "$client"; do
    [ -x "$f" ] || { echo "run-demo: $f not found; build first: meson setup $build && meson compile -C $build" >&2; exit 1; }
done
endpoint=${RK_DEMO_ENDPOINT:-tcp://127.0.0.1:*}
log=$(mktemp /tmp/rk-demo.XXXXXX)
# --allow-admin-ops: the demo relaunches the kernel (an admin operation)
"$bridge" --backend auto --bind "$endpoint" --allow-admin-ops >"$log" 2>&1 &
pid=$!
stop() {
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        wait "$pid" && rc=0 || rc=$?
        echo "== rk-bridge stopped with SIGTERM (exit status $rc)"
    fi
    rm -f "$log"
}
trap stop EXIT INT TERM
# the start-up line names the endpoint actually bound
i=0
until grep -q "listening on" "$log"; do
    i=$((i + 1))
    if [ $i -gt 300 ] || ! kill -0 "$pid" 2>/dev/null; then
        cat "$log" >&2
        echo "run-demo: rk-bridge did not start" >&2
        exit 1
    fi
    sleep 0.1
done
# the start-up line (backend, why, endpoint); the library's log lines
# (self-test, worker start) come before it
echo "== $(grep -m 1 "listening on" "$log")"
ep=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$log" | head -n 1)

echo "== C client (rk-client) against $ep"
"$client" -e "$ep" ping
"$client" -e "$ep" echo "hello, ringkernel"
"$client" -e "$ep" vadd -n 1000000
"$client" -e "$ep" echo --size 64 --count 20000 --quiet
"$client" -e "$ep" launch --grid 0 --block 256 --smem 0
if /usr/bin/python3 -c '' 2>/dev/null; then # the status map, its main fields (all: rk-client status)
    "$client" -e "$ep" status --json | /usr/bin/python3 -c 'import json, sys
s = json.load(sys.stdin); w = s["worker"]; c = s["counters"]; k = s["kernel"]
print("status: backend %s (%s); worker %s, restarts %d, faults %d; kernel grid %d block %d smem %d" % (
      s["backend"], s["backend_why"], w["state"], w["restarts"], w["faults"], k["grid"], k["block"], k["smem"]))
print("        requests %d, replies %d, errors %d; start-up ring p50 %.1f us, p99 %.1f us" % (c["requests"],
      c["replies"], c["errors"], s["ring"]["p50_ns"] / 1e3, s["ring"]["p99_ns"] / 1e3))'
else
    "$client" -e "$ep" status --json
fi
"$client" -e "$ep" actors
"$client" -e "$ep" call vadd a=f32:1,2,3 b=f32:0.5,0.5,0.5 -f f32
if [ -x "$build/samples/rk-client-sample" ]; then
    echo "== C sample client (samples/client.c, librkc) against $ep"
    "$build/samples/rk-client-sample" "$ep"
fi

if /usr/bin/python3 -c 'import zmq, msgpack' 2>/dev/null; then
    echo "== Python sample client (samples/python/client.py, the ringkernel package)"
    /usr/bin/python3 "$here/python/client.py" --endpoint "$ep"
else
    echo "== Python sample client skipped: /usr/bin/python3 lacks zmq or msgpack (apt install python3-zmq python3-msgpack)"
fi
