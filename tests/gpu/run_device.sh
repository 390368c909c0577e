#!/bin/bash
# run_device.sh - what one call on the GPU machine does (see device/README.md):
#   tests/gpu/run_device.sh [build|tests|bench|variants|sanitize|all]...
# Summaries and JSON go to $OUT (or ./device-out), at most 8 files (the
# device tool brings back no more): the verbose logs go to $LOGS and come
# back as $OUT/logs.tgz.
set -u
OUT=${OUT:-$PWD/device-out}
LOGS=${LOGS:-/tmp/rk-logs}
mkdir -p "$OUT" "$LOGS"
B=${B:-/tmp/b}
[ -f .devdeps/activate ] && source .devdeps/activate >/dev/null 2>&1
export CPATH=${RK_DEPS:-/tmp/rkdeps}/usr/include${CPATH:+:$CPATH}
step_build() {
  { meson setup "$B" -Dcuda=enabled >"$LOGS/setup.log" 2>&1 || meson setup --reconfigure "$B" -Dcuda=enabled >"$LOGS/setup.log" 2>&1; } &&
    ninja -C "$B" >"$LOGS/build.log" 2>&1 || { tail -n 40 "$LOGS/build.log"; step_pack; exit 1; }
  echo "build ok"
}
step_tests() {
  meson test -C "$B" --suite gpu --print-errorlogs >"$OUT/gpu_tests.log" 2>&1
  echo "gpu suite rc=$?"; grep -E "^ *[0-9]+/[0-9]+ " "$OUT/gpu_tests.log"
  grep -h -E "PASS|fault seen|close" "$B"/meson-logs/testlog.txt | head -n 12
  cp "$B"/meson-logs/testlog.txt "$LOGS/gpu_testlog.txt" 2>/dev/null
}
step_bench() {
  timeout ${BENCH_TIMEOUT:-240} "$B/benchmarks/rk-bench" gpu --count ${COUNT:-100000} --json "$OUT/bench_gpu.json" >"$OUT/bench.log" 2>&1
  echo "bench rc=$?"; cat "$OUT/bench.log" | tail -n 45
  /usr/bin/python3 benchmarks/plot_cdf.py "$OUT/bench_gpu.json" "$OUT/bench_gpu_cdf.png" >/dev/null 2>&1 || echo "(no plot here)"
}
step_variants() {
  # busy-path variants of the ring kernel (rk-bench gpu --variants): serial vs pipelined, 1+1 vs 2+2 host threads
  timeout ${VARIANTS_TIMEOUT:-120} "$B/benchmarks/rk-bench" gpu --variants >"$OUT/variants.log" 2>&1
  echo "variants rc=$?"; grep -E "variant" "$OUT/variants.log"
}
step_sanitize() {
  export RK_GPU_QUICK=1 RK_CUDA_SELFTEST_MS=120000 RK_CUDA_HEARTBEAT_MS=30000
  : >"$OUT/sanitizer.log"
  for tool in ${TOOLS:-memcheck racecheck synccheck}; do
    for t in ${SAN_TESTS:-gpu_ops gpu_validate custom_actor_sample gpu_stress_10M_4_producers}; do
      s=$(date +%s)
      exe="$B/tests/gpu/test_$t"
      [ -x "$exe" ] || exe="$B/samples/custom_actor/custom_actor"
      timeout ${SAN_TIMEOUT:-120} compute-sanitizer --tool $tool --error-exitcode 9 "$exe" --require-gpu >"$LOGS/san_${tool}_$t.log" 2>&1
      rc=$?
      echo "$tool $t rc=$rc $(( $(date +%s) - s ))s $(grep -E 'SUMMARY' "$LOGS/san_${tool}_$t.log" | tail -n 1)" | tee -a "$OUT/sanitizer.log"
    done
  done
}
step_pack() {
  tar -czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null
}
for s in "${@:-all}"; do
  case $s in
    all) step_build; step_tests; step_bench; step_variants; step_sanitize ;;
    *) step_$s ;;
  esac
done
step_pack
