#!/bin/sh
# test_bench_bridge.sh RK_BENCH RK_BRIDGE - `rk-bench bridge` end to end on
# the CPU backend (small counts: what it writes, not how fast): a bad
# option is refused in one line naming it (ring mode's too), a run against
# no bridge ends within its --timeout naming the endpoint, and a run
# against a bridge (through the broker hop too) writes every row, the
# threads that served them in the throughput rows, and each round of the
# alternating throughput runs (--rounds).
set -u
bench=$1 bridge=$2
t=$(mktemp -d)
bpid=
trap '[ -n "$bpid" ] && kill -KILL "$bpid" 2>/dev/null; rm -rf "$t"' EXIT
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
# gpu mode, where this build has it (its options are parsed before any
# device is looked for; --help answers in every build, so ask with a bad one)
if ! "$bench" gpu --bogus 2>&1 | grep -q "not available in this build"; then
  refused "rk-bench gpu: unknown option --bogus (see rk-bench gpu --help)" gpu --bogus
  refused "option --count needs a value" gpu --count
  refused "unexpected argument extra" gpu extra
fi
for mode in ring bridge; do
  "$bench" $mode --help >"$t/out" 2>&1 || fail "$mode --help: exit $?"
  grep -q "^usage: rk-bench" "$t/out" || fail "$mode --help: $(cat "$t/out")"
done

"$bench" bridge --raw-io-threads 0 >"$t/out" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--raw-io-threads 0: exit $rc, want 2"
grep -q -- "--raw-io-threads 0" "$t/out" || fail "--raw-io-threads 0 not named: $(cat "$t/out")"

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
