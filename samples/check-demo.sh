#!/bin/sh
# samples/check-demo.sh BUILD_DIR - runs the README's demo (run-demo.sh)
# as "Run it" does and checks that a person sees what it promises: the
# start-up line with the backend and why, each client's results with
# their latency, the status summary, and the bridge stopping cleanly.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=$(RK_DEMO_ENDPOINT=tcp://127.0.0.1:* sh "$here/run-demo.sh" "$1" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "check-demo: run-demo.sh exited $rc"; exit 1; }
fail=0
expect() { # a line matching the extended regex $1 must be there
    echo "$out" | grep -Eq "$1" || { echo "check-demo: no line matches: $1"; fail=1; }
}
expect '^== rk-bridge [0-9.]+: backend (cpu|cuda) \(.+\).* listening on tcp://127\.0\.0\.1:[0-9]+$'
expect '^ping: backend (cpu|cuda), [0-9.]+ us$'
expect '^echo x 20000: round trip p50 [0-9.]+ us, p90 [0-9.]+ us, p99 [0-9.]+ us'
expect '^status: backend (cpu|cuda) \(.+\); worker running, restarts [0-9]+, faults 0; kernel grid'
expect '^ +requests [0-9]+, replies [0-9]+, errors 0; start-up ring p50 [0-9.]+ us'
expect '^== rk-bridge stopped with SIGTERM \(exit status 0\)$'
if /usr/bin/python3 -c 'import zmq, msgpack' 2>/dev/null; then
    expect '^python echo 64 B x 200: all intact; round trip p50 [0-9.]+ us'
fi
exit $fail
