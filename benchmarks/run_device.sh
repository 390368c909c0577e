#!/bin/bash
# run_device.sh - one call on the GPU machine (the device tool's `run`):
# build with CUDA, run the gpu suite, rk-bench gpu + ring (cuda), and the
# bridge on the CUDA backend (latency bound and throughput), the main-job
# demo. Logs and JSON go to $OUT.   carry: [".devdeps"]
set -u
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
# the device tool returns at most 8 files: JSON records stay in $OUT, logs
# go to $L and come back as one logs.tgz
L=$(mktemp -d); trap 'tar -czf "$OUT/logs.tgz" -C "$L" . 2>/dev/null' EXIT
B=${B:-/tmp/b}
source .devdeps/activate >/dev/null 2>&1
export CPATH=/tmp/rkdeps/usr/include${CPATH:+:$CPATH}
t0=$SECONDS
stamp() { echo "[$((SECONDS - t0)) s] $*"; }
stamp build
# the build and its checks are the gpu suite's script's (one place)
OUT="$OUT" LOGS="$L" B="$B" bash tests/gpu/run_device.sh build || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$L/gpu.txt"
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  stamp "gpu + fast + bridge suites"
  meson test -C "$B" --suite gpu --suite fast --suite bridge --print-errorlogs >"$L/tests.log" 2>&1
  echo "tests rc=$?"; grep -E "^ *[0-9]+/[0-9]+ " "$L/tests.log"
fi
stamp "rk-bench ring (cuda)"
"$B/benchmarks/rk-bench" ring --backend cuda --count 200000 --idle-seconds 5 --json "$OUT/ring_cuda.json" 2>&1 | tail -5
if [ "${SKIP_GPU_BENCH:-0}" != 1 ]; then
  stamp "rk-bench gpu"
  "$B/benchmarks/rk-bench" gpu --count ${COUNT:-100000} --json "$OUT/bench_gpu.json" >"$L/bench_gpu.log" 2>&1
  echo "bench gpu rc=$?"; tail -35 "$L/bench_gpu.log"
fi
bridge_run() { # name, bridge options..., -- bench options...
  local name=$1; shift; local bo=() ; while [ "$1" != -- ]; do bo+=("$1"); shift; done; shift
  "$B/bridge/rk-bridge" --backend cuda "${bo[@]}" >"$L/bridge_$name.log" 2>&1 &
  local pid=$!; sleep 3; head -1 "$L/bridge_$name.log"
  "$B/benchmarks/rk-bench" bridge "$@" --json "$OUT/bridge_$name.json" 2>&1 | tail -12
  kill -TERM $pid; wait $pid; echo "bridge exit $?"
}
stamp "bridge latency + throughput, default mode"
bridge_run tcp --bind tcp://127.0.0.1:5555 -- --endpoint tcp://127.0.0.1:5555 --threads 8 --window 128 --messages 2000000
bridge_run ipc --bind ipc:///tmp/rkb.sock -- --endpoint ipc:///tmp/rkb.sock --threads 8 --window 128 --messages 2000000
stamp "bridge throughput: --io-threads (frontend + workers over SPSC rings) x ZeroMQ I/O threads x clients"
port=5560
for cfg in ${BRIDGE_SWEEP:-"io1:1:1:8:128" "io2:2:1:8:128" "io3z2:3:2:6:256" "io4z2:4:2:6:256"}; do
  IFS=: read -r name iot zio cl win <<<"$cfg"
  bridge_run "tcp_$name" --bind tcp://127.0.0.1:$port --io-threads "$iot" --zmq-io-threads "$zio" -- \
    --endpoint tcp://127.0.0.1:$port --threads "$cl" --window "$win" --messages 4000000 --no-latency
  port=$((port + 1))
done
[ "${SKIP_DEMO:-0}" = 1 ] && exit 0
stamp "main job demo (auto backend)"
timeout 120 bash samples/run-demo.sh "$B" >"$L/demo.log" 2>&1; echo "demo rc=$?"; head -30 "$L/demo.log"
stamp done
