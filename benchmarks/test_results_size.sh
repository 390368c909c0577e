#!/bin/bash
# test_results_size.sh - benchmarks/results stays small enough to travel:
# every call to the GPU machine is sent the whole tree, 64 MiB at most
# with the dependency packs it carries (device/README.md). A record over
# 200 KB is stored gzip'd (benchmarks/results/README.md); h200_gpu.json,
# the CDF plot test's input, is the one exception. Fails naming each file
# that breaks the rule, and when the folder passes 16 MB.
#   test_results_size.sh RESULTS_DIR
set -u
dir=${1:?usage: test_results_size.sh RESULTS_DIR}
bad=$(find "$dir" -maxdepth 1 -type f -size +200k ! -name '*.gz' ! -name h200_gpu.json | sort)
rc=0
if [ -n "$bad" ]; then
  echo "FAIL: records over 200 KB not gzip'd (gzip -9 -n them; the docs cite NAME.json as before):"
  echo "$bad" | sed 's|^|  |'
  rc=1
fi
kb=$(du -sk "$dir" | cut -f1)
if [ "$kb" -gt 16384 ]; then
  echo "FAIL: $dir holds $kb KB, over 16 MB: the tree sent to the GPU machine leaves too little room for its packs"
  rc=1
fi
[ $rc = 0 ] && echo "ok: every record over 200 KB gzip'd; $dir holds $kb KB"
exit $rc
