#!/usr/bin/env bash
# Installs ringkernel as a user would and checks the result (issue 11):
#  - a library-only build (-Dtests=false) configures, builds and installs
#    with cmocka hidden (a control configure with -Dtests=true must then
#    fail on cmocka, or the hiding proves nothing);
#  - `meson install` to a scratch prefix puts what it should there (no
#    samples in bin/);
#  - a program builds with `pkg-config --cflags --libs rk` and with
#    `--static` (-static: every private library must be listed), and runs;
#  - the bridge clients: samples/client.c builds with `pkg-config --cflags
#    --libs rkc` and calls echo on the installed rk-bridge, and the Python
#    package imports from the prefix (PYTHONPATH) and pings it; with the
#    default prefix /usr/local it would install where /usr/bin/python3
#    looks without PYTHONPATH (configured only, not installed);
#  - the installed rk-bench, rk-client and rk-bridge run from the prefix
#    (rpath $ORIGIN/..), with matching versions; rk-bridge serves a ping;
#  - a module of GPU actors builds from the prefix with nvcc as the README
#    says (rk/gpu_actor.cuh) and the installed rk-bridge serves its CPU twins;
#  - every man page renders with `man --warnings -l` and no warning;
#  - rk-bridge.service passes `systemd-analyze verify` (skipped where
#    there is no systemd-analyze) and `security` below exposure 2.5.
# Configured with -Dcuda=disabled so it does not depend on the CUDA build.
#   bash .ci/install-check.sh [OUTDIR]     (from the repository root)
# Writes OUTDIR/meson-logs/testlog.json (one result a line, as meson test
# does) for .ci/run's summary; exits 1 when a check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
src=$PWD
out=${1:-$src/build-install}
rm -rf "$out"
mkdir -p "$out/meson-logs"
prefix=$out/prefix
log=$out/meson-logs/testlog.json
: >"$log"
failed=0

# result NAME OK|FAIL|SKIP [message]
result() {
  printf '{"name": "install_%s", "result": "%s"}\n' "$1" "$2" >>"$log"
  echo "$2: $1${3:+: $3}"
  [ "$2" = FAIL ] && failed=1
  return 0
}
# check NAME CMD...: runs CMD with its output in OUTDIR/NAME.log
check() {
  local name=$1; shift
  if "$@" >"$out/$name.log" 2>&1; then
    result "$name" OK
  else
    result "$name" FAIL "see $out/$name.log"
    tail -20 "$out/$name.log" | sed 's/^/    /'
  fi
}

# ---- cmocka hidden: pkg-config sees every .pc but cmocka's, and meson's
# cmake lookup finds no cmake ----
hide=$out/no-cmocka
mkdir -p "$hide/pc"
IFS=: read -ra pcdirs <<<"$(pkg-config --variable pc_path pkg-config)"
for d in "${pcdirs[@]}"; do
  for f in "$d"/*.pc; do
    [ -e "$f" ] && [ "$(basename "$f")" != cmocka.pc ] && ln -sf "$f" "$hide/pc/"
  done
done
printf "[binaries]\ncmake = '/nonexistent/cmake'\n" >"$hide/native.ini"
nocmocka() { PKG_CONFIG_LIBDIR=$hide/pc PKG_CONFIG_PATH= "$@"; }

control() { # with the tests on, configure must fail on cmocka
  if nocmocka meson setup "$out/control" -Dcuda=disabled -Dtests=true \
      --native-file "$hide/native.ini"; then
    echo "configured with -Dtests=true: cmocka was not hidden"; return 1
  fi
  grep -q 'Dependency "cmocka" not found' "$out/control/meson-logs/meson-log.txt"
}
check cmocka_hidden_control control

build() {
  nocmocka meson setup "$out/build" -Dcuda=disabled -Dtests=false -Dman=enabled \
    -Dbuildtype=release --prefix="$prefix" --native-file "$hide/native.ini" &&
    ninja -C "$out/build" && meson install -C "$out/build"
}
check library_build_without_cmocka build
if [ ! -d "$prefix" ]; then
  echo "nothing installed: the remaining checks cannot run"
  exit 1
fi

libdir=$(dirname "$(find "$prefix" -name rk.pc)")/..
libdir=$(cd "$libdir" && pwd)
version=$(meson introspect --projectinfo "$out/build" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
export PKG_CONFIG_PATH=$libdir/pkgconfig

installed_files() {
  local missing=0
  for f in include/rk/rk.h include/rk/version.h include/rk/log.h include/rk/error.h include/rk/module.h \
      bin/rk-bridge bin/rk-client bin/rk-bench share/man/man1/rk-bridge.1 \
      share/man/man1/rk-client.1 share/man/man1/rk-bench.1 share/man/man3/librk.3 \
      include/rk/client.h share/man/man3/rkc.3 share/man/man3/rkc_actor_call.3 \
      lib/python3/dist-packages/ringkernel/__init__.py \
      share/man/man3/rk_runtime_open.3 share/man/man3/rk_ring_init.3 \
      share/man/man3/rk_actor_call.3 lib/systemd/system/rk-bridge.service \
      include/rk/gpu_actor.cuh include/rk/device/kernel.cuh include/rk/device/rk_abi.h; do
    [ -e "$prefix/$f" ] || { echo "missing: $f"; missing=1; }
  done
  for f in librk.so librk.a pkgconfig/rk.pc librkc.so librkc.a pkgconfig/rkc.pc; do
    [ -e "$libdir/$f" ] || { echo "missing: $libdir/$f"; missing=1; }
  done
  ls "$prefix/bin"
  if [ "$(ls "$prefix/bin" | sort | tr '\n' ' ')" != "rk-bench rk-bridge rk-client " ]; then
    echo "bin/ holds more than the three programs (samples are not installed)"; missing=1
  fi
  return $missing
}
check installed_files installed_files

versions() {
  local pc; pc=$(pkg-config --modversion rk) || return 1
  local bench; bench=$(env -u LD_LIBRARY_PATH "$prefix/bin/rk-bench" --version) || return 1
  grep -q "RK_VERSION_STRING \"$version\"" "$prefix/include/rk/version.h" || return 1
  echo "meson.build $version, pkg-config $pc, rk-bench: $bench"
  [ "$pc" = "$version" ] && [[ "$bench" == "rk-bench $version "*"librk $version)" ]]
}
check versions_agree versions

# run_app BINARY: exactly "ok librk VERSION" on stdout, nothing on stderr
run_app() {
  local o e
  o=$("$@" 2>"$out/app.stderr") || { echo "exit $?: $o"; cat "$out/app.stderr"; return 1; }
  e=$(cat "$out/app.stderr")
  echo "stdout: [$o] stderr: [$e]"
  [ "$o" = "ok librk $version" ] && [ -z "$e" ]
}

dynamic() {
  echo "cc ... $(pkg-config --cflags --libs rk)"
  cc "$src/.ci/install-check.c" $(pkg-config --cflags --libs rk) -o "$out/app-dynamic" || return 1
  # a prefix outside the loader's path: the program names it (README: Install)
  LD_LIBRARY_PATH=$libdir ldd "$out/app-dynamic" | grep "librk.so.*$libdir" || return 1
  LD_LIBRARY_PATH=$libdir run_app "$out/app-dynamic"
}
check pkgconfig_dynamic dynamic

static() {
  echo "cc -static ... $(pkg-config --cflags --libs --static rk)"
  cc -static "$src/.ci/install-check.c" $(pkg-config --cflags --libs --static rk) \
    -o "$out/app-static" || return 1
  if readelf -d "$out/app-static" | grep NEEDED; then echo "not static"; return 1; fi
  (unset LD_LIBRARY_PATH; run_app "$out/app-static")
}
check pkgconfig_static static

programs() { # from the prefix, with no library path set
  set -e
  for p in rk-bench rk-bridge; do
    readelf -d "$prefix/bin/$p" | grep -E 'RUNPATH|RPATH' | grep -F '$ORIGIN'
  done
  unset LD_LIBRARY_PATH
  "$prefix/bin/rk-client" --help >/dev/null
  "$prefix/bin/rk-bridge" --help >/dev/null
  "$prefix/bin/rk-bench" ring --backend cpu --count 2000 --messages 2000 --idle-seconds 0
  local sock=$out/rk.sock
  "$prefix/bin/rk-bridge" --backend cpu --bind "ipc://$sock" >"$out/bridge.out" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do grep -q listening "$out/bridge.out" && break; sleep 0.1; done
  cat "$out/bridge.out"
  "$prefix/bin/rk-client" --endpoint "ipc://$sock" ping
  kill -TERM $pid
  wait $pid
}
check installed_programs_run bash -c "$(declare -f programs); prefix='$prefix' out='$out' programs"

clients() { # librkc through pkg-config, and the Python package, against the installed bridge
  set -e
  echo "cc ... $(pkg-config --cflags --libs rkc)"
  cc "$src/samples/client.c" $(pkg-config --cflags --libs rkc) -o "$out/client-rkc"
  local sock=$out/rkc.sock
  env -u LD_LIBRARY_PATH "$prefix/bin/rk-bridge" --backend cpu --bind "ipc://$sock" >"$out/bridge-rkc.out" 2>&1 &
  local pid=$!
  trap 'kill -TERM $pid 2>/dev/null; wait $pid' RETURN
  for _ in $(seq 100); do grep -q listening "$out/bridge-rkc.out" && break; sleep 0.1; done
  local o; o=$(LD_LIBRARY_PATH=$libdir "$out/client-rkc" "ipc://$sock")
  echo "$o"
  grep -qx "echo: hello (.* us)" <<<"$o" || { echo "no echo line"; return 1; }
  LD_LIBRARY_PATH=$libdir ldd "$out/client-rkc" | grep "librkc.so.*$libdir"
  local pydir; pydir=$(dirname "$(dirname "$(find "$prefix" -path '*/ringkernel/__init__.py')")")
  echo "PYTHONPATH=$pydir"
  (cd "$out" && PYTHONPATH=$pydir /usr/bin/python3 -c 'import ringkernel, sys
assert ringkernel.__file__.startswith(sys.argv[1]), ringkernel.__file__
with ringkernel.Client(sys.argv[2], timeout=10) as rk:
    print("python:", ringkernel.__file__, rk.ping(), rk.call("echo", data=b"hi")["data"])' "$pydir" "ipc://$sock")
}
if /usr/bin/python3 -c 'import zmq, msgpack' 2>/dev/null; then
  check clients_pkgconfig_python bash -c "$(declare -f clients); src='$src' prefix='$prefix' out='$out' libdir='$libdir' clients"
else
  result clients_pkgconfig_python SKIP "/usr/bin/python3 lacks zmq or msgpack (.ci/deps installs them)"
fi

python_default_prefix() { # README: with /usr/local, no PYTHONPATH needed
  meson setup "$out/usrlocal" -Dcuda=disabled -Dtests=false -Dman=disabled --prefix=/usr/local >/dev/null || return 1
  local dir
  dir=$(meson introspect "$out/usrlocal" --installed | /usr/bin/python3 -c 'import json, os, sys
print(next(os.path.dirname(os.path.dirname(v)) for v in json.load(sys.stdin).values()
           if v.endswith("ringkernel/__init__.py")))') || return 1
  echo "the package would go to $dir"
  /usr/bin/python3 -c 'import sys; sys.exit(sys.argv[1] not in sys.path)' "$dir"
}
if [ -x /usr/bin/python3 ]; then
  check python_default_prefix_searched python_default_prefix
else
  result python_default_prefix_searched SKIP "no /usr/bin/python3"
fi

gpu_module() { # issue 10: GPU actors built from the prefix as the README says, served on the CPU
  set -e
  local nvcc; nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  echo "nvcc ... $(pkg-config --cflags rk)"
  "$nvcc" -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC,-fvisibility=hidden $(pkg-config --cflags rk) \
    "$src/samples/gpu_module/sample_actors.cu" -o "$out/sample_actors.so"
  local sock=$out/gm.sock
  env -u LD_LIBRARY_PATH "$prefix/bin/rk-bridge" --backend cpu --bind "ipc://$sock" \
    --actors "$out/sample_actors.so" >"$out/bridge-gm.out" 2>&1 &
  local pid=$!
  trap 'kill -TERM $pid 2>/dev/null; wait $pid' RETURN
  for _ in $(seq 100); do grep -q listening "$out/bridge-gm.out" && break; sleep 0.1; done
  local pydir; pydir=$(dirname "$(dirname "$(find "$prefix" -path '*/ringkernel/__init__.py')")")
  /usr/bin/python3 "$src/samples/gpu_module/check_sample_actors.py" "ipc://$sock" --client-path "$pydir"
}
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  result gpu_module_from_prefix SKIP "no nvcc"
elif ! /usr/bin/python3 -c 'import zmq, msgpack, numpy' 2>/dev/null; then
  result gpu_module_from_prefix SKIP "/usr/bin/python3 lacks zmq, msgpack or numpy (.ci/deps installs them)"
else
  check gpu_module_from_prefix bash -c "$(declare -f gpu_module); src='$src' prefix='$prefix' out='$out' gpu_module"
fi

man_pages() {
  local bad=0 n=0
  for page in "$prefix"/share/man/man*/*; do
    [ -L "$page" ] && { [ -e "$page" ] || { echo "dangling link: $page"; bad=1; }; continue; }
    n=$((n + 1))
    # lintian's check: groff warnings (unknown macros, lines that cannot
    # be broken, bad escapes) on stderr
    local w
    w=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$page" 2>&1 >/dev/null)
    if [ -n "$w" ]; then echo "$page:"; echo "$w"; bad=1; else echo "clean: $page"; fi
  done
  MANPATH=$prefix/share/man man -w rk_actor_call || bad=1
  [ "$n" -ge 6 ] || { echo "only $n pages"; bad=1; }
  return $bad
}
check man_pages_render man_pages

unit=$prefix/lib/systemd/system/rk-bridge.service
if command -v systemd-analyze >/dev/null; then
  verify() {
    # ExecStart must name the installed rk-bridge, Documentation= our page
    local o
    o=$(MANPATH=$prefix/share/man: systemd-analyze verify "$unit" 2>&1) || { echo "$o"; return 1; }
    echo "${o:-verify: no warnings}"
    [ -z "$o" ] || return 1
    systemd-analyze security --offline=yes --threshold=25 "$unit" | tail -1
  }
  check systemd_unit_verify verify
else
  result systemd_unit_verify SKIP "systemd-analyze not installed"
fi

exit $failed
