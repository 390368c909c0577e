#!/bin/bash
# run_device.sh - what one call on the GPU machine does (see device/README.md):
#   tests/gpu/run_device.sh [build|tests|bench|variants|sanitize|all]...
# Summaries and JSON go to $OUT (or ./device-out), at most 8 files (the
# device tool brings back no more): the verbose logs go to $LOGS and come
# back as $OUT/logs.tgz.   carry: [".devdeps"]
set -u
OUT=${OUT:-$PWD/device-out}
LOGS=${LOGS:-/tmp/rk-logs}
mkdir -p "$OUT" "$LOGS"
B=${B:-/tmp/b}
[ -f .devdeps/activate ] && source .devdeps/activate >/dev/null 2>&1
export CPATH=${RK_DEPS:-/tmp/rkdeps}/usr/include${CPATH:+:$CPATH}
# the Python tests (gpu_module_cuda, interop) with the packed Python
# (the device notes' pack-pydeps puts it in .devdeps/py; they skip without)
if [ -f .devdeps/py/activate ]; then
  source .devdeps/py/activate
  MESON_OPTS="${MESON_OPTS:-} -Dtest_python=$(command -v rkpython)"
fi
t0=$SECONDS
stamp() { echo "[$((SECONDS - t0)) s] $*"; }
step_build() {
  stamp build
  # a warm machine keeps $B: configure it again, or the options given now
  # would be ignored ("meson setup" on a configured directory exits 0)
  local again=; [ -f "$B/build.ninja" ] && again=--reconfigure
  meson setup $again "$B" -Dcuda=enabled -Dbuildtype=release ${MESON_OPTS:-} >"$LOGS/setup.log" 2>&1 &&
    ninja -C "$B" >"$LOGS/build.log" 2>&1 || { tail -n 40 "$LOGS/setup.log" "$LOGS/build.log"; step_pack; exit 1; }
  grep -q "rk-bridge's allocator *: *jemalloc" "$LOGS/setup.log" ||
      echo "WARNING: rk-bridge is built with glibc's malloc, not jemalloc (the default build's where" \
        "libjemalloc-dev is found): carry libjemalloc2 and libjemalloc-dev in .devdeps (device/README.md)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
}
step_tests() {
  stamp "gpu + isolation suites"
  timeout ${TESTS_TIMEOUT:-900} meson test -C "$B" --suite gpu --suite isolation --print-errorlogs \
    >"$OUT/gpu_tests.log" 2>&1
  echo "gpu + isolation suites rc=$?"; grep -E "^ *[0-9]+/[0-9]+ " "$OUT/gpu_tests.log"
  grep -h -E "^FAIL|saxpy n=16777216|crash on|spin on|PASS|poisons in|endless loop|refused|auto beside|share_gpu|fault seen|close after|kills in" \
    "$B"/meson-logs/testlog.txt | head -n 20
  cp "$B"/meson-logs/testlog.txt "$LOGS/gpu_testlog.txt" 2>/dev/null
}
step_bench() {
  stamp "rk-bench gpu"
  local run=${RUN:-1}
  timeout ${BENCH_TIMEOUT:-300} "$B/benchmarks/rk-bench" gpu --count ${COUNT:-100000} --faults ${FAULTS:-20} \
    --module "$B/benchmarks/bench_actors.so" --json "$OUT/bench_gpu_$run.json" >"$OUT/bench_$run.log" 2>&1
  echo "bench rc=$?"; tail -n ${BENCH_TAIL:-45} "$OUT/bench_$run.log"
}
step_variants() {
  # busy-path variants (needs -Dkernel_experiments=true in MESON_OPTS)
  timeout ${VARIANTS_TIMEOUT:-120} "$B/benchmarks/rk-bench" gpu --variants >"$OUT/variants.log" 2>&1
  echo "variants rc=$?"; grep -E "variant" "$OUT/variants.log"
}
step_sanitize() {
  stamp "compute-sanitizer"
  # the kernel runs in the worker process: follow children; a sanitized
  # kernel is slow, so the deadlines are generous
  export RK_GPU_QUICK=1 RK_CUDA_SELFTEST_MS=120000 RK_HEARTBEAT_MS=60000 RK_WORKER_START_MS=120000
  : >"$OUT/sanitizer.log"
  for tool in ${TOOLS:-memcheck racecheck synccheck}; do
    for t in ${SAN_TESTS:-gpu_ops gpu_validate custom_actor_sample gpu_stress_10M_4_producers}; do
      s=$(date +%s)
      exe="$B/tests/gpu/test_$t"
      [ -x "$exe" ] || exe="$B/samples/custom_actor/custom_actor"
      timeout ${SAN_TIMEOUT:-120} compute-sanitizer --target-processes all --tool $tool --error-exitcode 9 \
        "$exe" --require-gpu >"$LOGS/san_${tool}_$t.log" 2>&1
      rc=$?
      echo "$tool $t rc=$rc $(( $(date +%s) - s ))s $(grep -E 'SUMMARY' "$LOGS/san_${tool}_$t.log" | tail -n 2 | tr '\n' ' ')" | tee -a "$OUT/sanitizer.log"
    done
  done
}
step_pack() {
  tar -czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null
}
for s in "${@:-all}"; do
  case $s in
    all) step_build; step_tests; step_bench; step_sanitize ;;
    *) step_$s ;;
  esac
done
stamp done
step_pack
