#!/bin/sh
# test_no_cuda.sh BUILD_DIR - librk links no CUDA library, and a program
# linked with it starts where no CUDA driver or runtime can be loaded (the
# CI machines have none): auto falls back to the CPU and says why.
set -eu
b=$1
lib=$b/runtime/librk.so
needed=$(readelf -d "$lib" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p')
echo "librk NEEDED: $needed"
if echo "$needed" | grep -qi cuda; then echo "FAIL: librk needs a CUDA library"; exit 1; fi
for f in "$b/runtime/rk-worker" "$b/runtime/rk-cuda.so"; do
  [ -e "$f" ] || continue
  if readelf -d "$f" | grep NEEDED | grep -qi cudart; then echo "FAIL: $f needs the shared CUDA runtime"; exit 1; fi
done
# the CUDA runtime and driver out of reach: nothing on the loader's path
# but the build, and the driver's library name pointed at nothing
out=$(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$b/runtime" RK_LOG=warn "$b/samples/rk-hello" 2>&1) || {
  echo "FAIL: rk-hello did not run: $out"; exit 1; }
echo "$out"
echo "$out" | grep -q "backend: " || { echo "FAIL: no backend line"; exit 1; }
if echo "$out" | grep -q "backend: cpu"; then
  echo "$out" | grep -q "CUDA backend unavailable" || { echo "FAIL: the fallback does not say why"; exit 1; }
fi
echo PASS
