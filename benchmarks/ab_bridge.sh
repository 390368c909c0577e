#!/bin/bash
# ab_bridge.sh - rk-bridge builds against each other, in turn, on one
# machine: each round starts every build fresh (in the order given), runs
# `rk-bench bridge` against it (raw ZeroMQ and the bridge alternating
# within that run, so every ratio is against a raw echo measured minutes
# apart at most), and stops it. Prints one line per run and, at the end,
# each build's ratios and their median.
#
#   benchmarks/ab_bridge.sh [-r ROUNDS] [-o DIR] [-b "BRIDGE OPTIONS"] RK_BENCH \
#       NAME=RK_BRIDGE [NAME=RK_BRIDGE ...] [-- RK-BENCH BRIDGE OPTIONS]
#
# ROUNDS (default 3) rounds; each run's JSON goes to DIR/ab_NAME_ROUND.json
# (default: a temporary folder) and each bridge's log beside it. The
# bridge gets `--bind tcp://127.0.0.1:PORT` (a port per run) plus the
# BRIDGE OPTIONS; rk-bench gets the matching --endpoint, --no-latency
# and, unless given after --, --threads 8 --window 128 --messages 2000000
# --rounds 2. Needs python3 to read the JSON.
set -u
rounds=3 out="" bopts=""
while getopts "r:o:b:" opt; do
  case $opt in
    r) rounds=$OPTARG ;; o) out=$OPTARG ;; b) bopts=$OPTARG ;;
    *) sed -n 2,17p "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 2 ] || { sed -n 2,17p "$0"; exit 2; }
bench=$1; shift
names=() bins=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  case $1 in
    *=*) names+=("${1%%=*}"); bins+=("${1#*=}") ;;
    *) echo "ab_bridge.sh: $1: expected NAME=RK_BRIDGE" >&2; exit 2 ;;
  esac
  shift
done
[ "${1:-}" = -- ] && shift
bench_opts=("$@")
[ ${#bench_opts[@]} -gt 0 ] || bench_opts=(--threads 8 --window 128 --messages 2000000 --rounds 2)
out=${out:-$(mktemp -d)}
mkdir -p "$out"
port=$((5600 + RANDOM % 200))
ratio() { # the JSON's bridge / raw throughput
  python3 -c 'import json,sys
r={x["name"]:x for x in json.load(open(sys.argv[1]))["results"]}
print("%.3f" % (r["bridge_throughput_echo_64"]["msgs_per_s"]/r["zmq_raw_throughput_echo_64"]["msgs_per_s"]))' "$1" 2>/dev/null ||
    echo "none"
}
declare -A got
for ((r = 1; r <= rounds; r++)); do
  for i in "${!names[@]}"; do
    n=${names[$i]} ep=tcp://127.0.0.1:$port; port=$((port + 1))
    # shellcheck disable=SC2086  # the bridge options are words
    "${bins[$i]}" --bind "$ep" $bopts >"$out/ab_${n}_$r.log" 2>&1 &
    pid=$!
    "$bench" bridge --endpoint "$ep" --no-latency --timeout 30 --json "$out/ab_${n}_$r.json" "${bench_opts[@]}" \
      >"$out/ab_${n}_$r.bench" 2>&1
    rc=$?
    kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null
    x=$(ratio "$out/ab_${n}_$r.json")
    got[$n]="${got[$n]:-} $x"
    echo "round $r $n: bridge / raw $x (rk-bench rc $rc; $(grep -o 'rounds [0-9., ]* x' "$out/ab_${n}_$r.bench" | head -1))"
  done
done
for n in "${names[@]}"; do
  # shellcheck disable=SC2086
  echo "$n: ${got[$n]} -> median $(printf '%s\n' ${got[$n]} | grep -v none | sort -n |
    awk '{a[NR]=$1} END {print NR ? (NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2) : "none"}')"
done
