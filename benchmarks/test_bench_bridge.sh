#!/bin/sh
# test_bench_bridge.sh RK_BENCH RK_BRIDGE [RK_BENCH_1_SCD] - `rk-bench bridge` end to end on
# the CPU backend (small counts: what it writes, not how fast): a bad
# option is refused in one line naming it (ring mode's too), a run against
# no bridge ends within its --timeout naming the endpoint, and a run
# against a bridge (through the broker hop too) writes every row, the
# threads that served them in the throughput rows, and each round of the
# alternating throughput runs (--rounds).
set -u
bench=$1 bridge=$2 man=${3:-} # man: doc/man/rk-bench.1.scd
t=$(mktemp -d)
bpid= fpid=
trap '[ -n "$bpid" ] && kill -KILL "$bpid" 2>/dev/null; [ -n "$fpid" ] && kill "$fpid" 2>/dev/null; rm -rf "$t"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# a bad option or argument: one line naming it and the --help to read,
# exit 2 (not getopt's line and the whole help); --help after a mode works
refused() { # WANT ARGS...
  want=$1; shift
  "$bench" "$@" >"$t/out" 2>&1
  rc=$?
  [ $rc -eq 2 ] || fail "$*: exit $rc, want 2: $(cat "$t/out")"
  [ "$(wc -l <"$t/out")" -eq 1 ] || fail "$*: not one line: $(cat "$t/out")"
  grep -qF -- "$want" "$t/out" || fail "$*: no \"$want\" in: $(cat "$t/out")"
}
refused "rk-bench ring: unknown option --bogus (see rk-bench ring --help)" ring --bogus
refused "unknown option -Z" ring -Z
refused "option --count needs a value" ring --count
refused "unexpected argument extra" ring extra
refused "option --json needs a value" ring --json
refused "rk-bench bridge: unknown option --bogus (see rk-bench bridge --help)" bridge --bogus
refused "option -n needs a value" bridge -n
refused "--count 0" bridge --count 0
# --rounds: 1 to 10, a bad one named as given
for r in 0 11 21 x 2x ""; do
  refused "rk-bench bridge: --rounds $r: give 1 to 10" bridge --rounds "$r"
done
refused "unknown mode bogus" bogus
# a --json FILE that cannot be written: refused before measuring, naming
# it and why (was found only after the whole run, exit 1, nothing kept);
# an existing record is not cut by the check, a new one not left behind
refused "rk-bench ring: cannot write --json $t/no/r.json: No such file or directory" \
  ring --json "$t/no/r.json" --count 10 --messages 10 --idle-seconds 0
refused "rk-bench bridge: cannot write --json $t: Is a directory" bridge -j "$t" --endpoint "ipc://$t/x" --timeout 0.5
echo kept >"$t/old.json"
"$bench" ring --json "$t/old.json" --count 0 >/dev/null 2>&1
[ "$(cat "$t/old.json")" = kept ] || fail "a refused run cut $t/old.json"
"$bench" ring --json "$t/new.json" --count 0 >/dev/null 2>&1
[ ! -e "$t/new.json" ] || fail "a refused run left $t/new.json"
# a bad number: refused as given with its range, not read as its digits
# (10x), as 0 (abc), in another base (0x10), skipped (an idle time of abc)
# or wrapped (a count whose buffer's size overflowed: a crash); a bridge
# --count under its 10 blocks measured nothing, --messages under --threads
# gave rows of 0 msg/s
refused "rk-bench ring: --count abc: give 1 to 100000000" ring --count abc
refused "rk-bench ring: --count 10x: give 1 to 100000000" ring -n 10x
refused "rk-bench ring: --count 2305843009213693953: give 1 to 100000000" ring --count 2305843009213693953
refused "rk-bench ring: --window 0x10: give 1 to 32768" ring --window 0x10
refused "rk-bench ring: --messages 0: give 1 to" ring --messages 0
refused "rk-bench ring: --idle-seconds abc: give 0 to 3600" ring --idle-seconds abc
refused "rk-bench ring: --idle-seconds -1: give 0 to 3600" ring -i -1
refused "rk-bench bridge: --count 5: give 10 to 100000000" bridge --count 5
refused "rk-bench bridge: --count 10x: give 10 to 100000000" bridge -n 10x
refused "rk-bench bridge: --size -1: give 0 to 4096" bridge --size -1
refused "rk-bench bridge: --window 99999999999: give 1 to 100000" bridge --window 99999999999
refused "rk-bench bridge: --threads 2x: give 1 to 1024" bridge -t 2x
refused "rk-bench bridge: --timeout abc: give 0.001 to 3600" bridge --timeout abc
refused "rk-bench bridge: --raw-io-threads 2x: give 1 to 64" bridge --raw-io-threads 2x
refused "rk-bench bridge: --messages 3: give at least --threads (4)" bridge --messages 3
# gpu mode, where this build has it (its options are parsed before any
# device is looked for; --help answers in every build, so ask with a bad one)
if ! "$bench" gpu --bogus 2>&1 | grep -q "not available in this build"; then
  refused "rk-bench gpu: unknown option --bogus (see rk-bench gpu --help)" gpu --bogus
  refused "option --count needs a value" gpu --count
  refused "unexpected argument extra" gpu extra
fi
# -V and --version say the same: the commit the record names (RK_BENCH_COMMIT
# from the environment) and librk's version (--version ignored the one,
# -V left out the other)
for v in --version -V "ring --version" "ring -V"; do
  out=$(RK_BENCH_COMMIT=c0ffee "$bench" $v 2>&1) || fail "$v: exit $?"
  echo "$out" | grep -q "^rk-bench .* (commit c0ffee; librk .*)$" || fail "$v: $out"
done
for mode in ring bridge; do
  "$bench" $mode --help >"$t/out" 2>&1 || fail "$mode --help: exit $?"
  grep -q "^usage: rk-bench" "$t/out" || fail "$mode --help: $(cat "$t/out")"
  # every option --help lists is in the man page (its bridge options were not)
  if [ -n "$man" ]; then
    for o in $(grep -oE -- '^ *(-[a-zA-Z], )?--[a-z][a-z-]*' "$t/out" | grep -o -- '--.*'); do
      grep -qE -- "$o(\*|,)" "$man" || fail "$mode $o: not in $man"
    done
  fi
done

"$bench" bridge --raw-io-threads 0 >"$t/out" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--raw-io-threads 0: exit $rc, want 2"
grep -q -- "--raw-io-threads 0" "$t/out" || fail "--raw-io-threads 0 not named: $(cat "$t/out")"

# the record names the bridge's GPU from its status (was "device": null, so
# that plot_cdf.py titled an H100 bridge's run "no GPU"): against a stand-in
# bridge on a GPU (pyzmq and msgpack, where installed)
if /usr/bin/python3 -c 'import zmq, msgpack' 2>/dev/null; then
  /usr/bin/python3 - "ipc://$t/gpu" <<'PY' &
import sys, zmq, msgpack
s = zmq.Context().socket(zmq.ROUTER)
s.setsockopt(zmq.RCVTIMEO, 20000)
s.bind(sys.argv[1])
n = 0
while True:
    try:
        who, frame = s.recv_multipart()
    except zmq.Again:
        break
    q, n = msgpack.unpackb(frame), n + 1
    r = {"v": 1, "id": q["id"], "ok": True}
    if q["op"] == "status":
        r.update(backend="cuda", device={"name": "NVIDIA H100 80GB HBM3", "sm_count": 132, "cc": "9.0"},
                 counters={"requests": n, "cpu_user_us": 0, "cpu_sys_us": 0})
    else:
        r["data"] = q["data"]
    s.send_multipart([who, msgpack.packb(r, use_bin_type=True)])
PY
  fpid=$!
  "$bench" bridge --endpoint "ipc://$t/gpu" --timeout 10 --no-latency --messages 200 --threads 1 --size 16 \
      --rounds 1 --json "$t/gpu.json" >"$t/out" 2>&1 || fail "against a GPU bridge: exit $?: $(cat "$t/out")"
  kill "$fpid" 2>/dev/null
  wait "$fpid" 2>/dev/null
  fpid=
  grep -q '"device": {"name": "NVIDIA H100 80GB HBM3", "cc": "9.0", "sm_count": 132' "$t/gpu.json" ||
    fail "the record does not name the bridge's GPU: $(cat "$t/gpu.json")"
  # rows are named for the --size they moved (a 16-B run's were *_64)
  for row in zmq_raw_throughput_echo_16 bridge_throughput_echo_16; do
    grep -q "\"name\": \"$row\"" "$t/gpu.json" || fail "no $row row in $(cat "$t/gpu.json")"
  done
fi

s=$(date +%s)
"$bench" bridge --endpoint "ipc://$t/nobody" --timeout 0.5 >"$t/out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "no bridge: exit $rc, want 1"
[ $(($(date +%s) - s)) -le 5 ] || fail "no bridge: took more than 5 s"
grep -q "no bridge answers at ipc://$t/nobody" "$t/out" || fail "no bridge: $(cat "$t/out")"

"$bridge" --backend cpu --bind "ipc://$t/b" --io-threads 2 --zmq-io-threads 3 >"$t/bridge.log" 2>&1 &
bpid=$!
"$bench" bridge --endpoint "ipc://$t/b" --timeout 10 --count 200 --messages 2000 --threads 2 \
    --window 8 --raw-io-threads 2 --broker --rounds 2 --json "$t/r.json" >"$t/out" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "against a bridge: exit $rc: $(cat "$t/out")"
# more client threads than descriptors: refused naming the need and the
# limit (ZeroMQ aborted the run: "Too many open files")
(ulimit -n 256 && exec "$bench" bridge --endpoint "ipc://$t/b" --timeout 10 --no-latency --threads 200 \
    --messages 2000 --rounds 1) >"$t/fd.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "--threads 200 needs about 1664 file descriptors, more than the 256" "$t/fd.out" ||
  fail "--threads 200 under ulimit -n 256: exit $rc: $(cat "$t/fd.out")"
for row in zmq_raw_echo_64 bridge_echo_64 ring_echo_64 zmq_raw_throughput_echo_64 \
           bridge_throughput_echo_64 bridge_delim_echo_64 broker_bridge_echo_64 \
           bridge_delim_throughput_echo_64 broker_bridge_throughput_echo_64; do
  grep -q "\"name\": \"$row\"" "$t/r.json" || fail "no $row row in $(cat "$t/r.json")"
done
grep "\"name\": \"zmq_raw_throughput_echo_64\"" "$t/r.json" | grep -q '"zmq_io_threads": 2' ||
  fail "the raw row does not say 2 I/O threads: $(cat "$t/r.json")"
grep "\"name\": \"bridge_throughput_echo_64\"" "$t/r.json" | grep -q '"bad": 0' ||
  fail "bad replies in the bridge's run: $(cat "$t/r.json")"
# the bridge's own threads, from its status (as started above)
grep "\"name\": \"bridge_throughput_echo_64\"" "$t/r.json" |
  grep -q '"io_threads": 2, "zmq_io_threads": 3' ||
  fail "the bridge row does not say its threads: $(cat "$t/r.json")"
# two rounds of 2 x 1000 messages each side: every throughput row sums them
# and lists each round's rate; the bound is printed over all and per round
for row in zmq_raw_throughput_echo_64 bridge_throughput_echo_64 \
           bridge_delim_throughput_echo_64 broker_bridge_throughput_echo_64; do
  line=$(grep "\"name\": \"$row\"" "$t/r.json")
  rounds=$(echo "$line" | grep -o '"rounds": \[[0-9, ]*\]')
  [ "$(echo "$rounds" | grep -o '[0-9][0-9]*' | wc -l)" -eq 2 ] ||
    fail "$row: want 2 rounds, got '$rounds' in $line"
  echo "$line" | grep -q '"count": 4000,' || fail "$row: want count 4000: $line"
done
grep "\"name\": \"bridge_throughput_echo_64\"" "$t/r.json" | grep -q '"bridge_cpu_us_per_msg": ' ||
  fail "no bridge_cpu_us_per_msg: $(cat "$t/r.json")"
grep "throughput bridge .* over 2 rounds each: .* x (>= 0.85: .*); rounds [0-9.]*, [0-9.]* x, worst" \
  "$t/out" >/dev/null || fail "no bound over the rounds: $(cat "$t/out")"
kill -TERM "$bpid"
wait "$bpid"
rc=$?
bpid=
[ $rc -eq 0 ] || fail "rk-bridge exit $rc after SIGTERM: $(cat "$t/bridge.log")"
echo PASS
