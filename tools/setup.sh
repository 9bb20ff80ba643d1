#!/usr/bin/env bash
# uma's one entry point on a fresh Debian 12 machine: installs what is missing, builds, runs.
#
#   tools/setup.sh demo    install, build (release), run `uma demo` on the default backend
#   tools/setup.sh test    install, build release (CMake's Release type) + ASan/UBSan, run the whole
#                          test suite in both; then the concurrency suites under TSan and a bounded
#                          libFuzzer run. Warnings are errors here (UMA_WERROR), and only here.
#   tools/setup.sh deps    install the Debian packages only
#
# Environment: UMA_JOBS (parallel build jobs, default: nproc), UMA_BUILD_ROOT (default: build),
# UMA_FUZZ_SECONDS (length of the fuzz run in `test`, default 60).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake make g++ pkg-config libcaf-dev libboost1.81-dev libboost-json1.81-dev
          libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libssl-dev
          libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev
          prometheus chromium python3 python3-pip curl)
# python3-pip (with python3-setuptools and python3-wheel) for uma_pip_install: `pip install
# python/` offline, without build isolation. curl: docs/cli.md's metrics transcript runs it.
jobs=${UMA_JOBS:-$(nproc)}
root=${UMA_BUILD_ROOT:-build}

install_deps() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "setup: installing ${missing[*]}"
  local sudo=()
  [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  # prometheus is here for the scrape test, which runs its own server on a free loopback port.
  # Debian's package would also start (and enable) a system service on :9090: a policy-rc.d that
  # refuses service starts keeps it from starting during the install, and the unit is disabled
  # afterwards, unless an operator had one of their own before.
  local own_policy=0 new_prometheus=0
  [[ " ${missing[*]} " == *" prometheus "* ]] && new_prometheus=1
  if [ "$new_prometheus" -eq 1 ] && [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee /usr/sbin/policy-rc.d >/dev/null
    "${sudo[@]}" chmod +x /usr/sbin/policy-rc.d
    own_policy=1
  fi
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" || { [ "$own_policy" -eq 1 ] && "${sudo[@]}" rm -f /usr/sbin/policy-rc.d; exit 1; }
  [ "$own_policy" -eq 1 ] && "${sudo[@]}" rm -f /usr/sbin/policy-rc.d
  if [ "$new_prometheus" -eq 1 ] && [ -d /run/systemd/system ]; then
    "${sudo[@]}" systemctl disable --now prometheus.service >/dev/null 2>&1 || true
  fi
}

# configure NAME [cmake args...]: a build tree under $root/NAME (Release unless the args say
# otherwise: the build type most users pick must build, warning-clean)
configure() {
  local name=$1; shift
  cmake -S . -B "$root/$name" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  cmake --build "$root/$name" -j "$jobs"
}

# build_target NAME TARGET [cmake args...]: one target of a build tree under $root/NAME
build_target() {
  local name=$1 target=$2; shift 2
  cmake -S . -B "$root/$name" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DUMA_BUILD_TESTS=ON \
    -DUMA_BUILD_TOOLS=OFF -DUMA_INSTALL=OFF -DUMA_WITH_CUDA=OFF "$@" >/dev/null
  cmake --build "$root/$name" -j "$jobs" --target "$target"
}

# The concurrency suites (stress, lifetime races, fault matrix, bad inputs) under ThreadSanitizer.
# CAF is Debian's, not built with TSan: tests/tsan.supp says what that costs and why.
run_tsan() {
  echo "=== tests: tsan (uma_reliability_tests)"
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" \
    "$root/tsan/tests/uma_reliability_tests"
}

# libFuzzer, bounded in time, from the seed corpus; new inputs and crash artifacts go to the
# build tree, never into the repository.
run_fuzz() {
  local seconds=${UMA_FUZZ_SECONDS:-60} log="$root/fuzz/fuzz-run.log" rc=0
  echo "=== fuzz: uma_fuzz for $seconds s (log: $log)"
  mkdir -p "$root/fuzz/corpus-run"
  "$root/fuzz/tests/fuzz/uma_fuzz" -max_total_time="$seconds" -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$root/fuzz/" "$root/fuzz/corpus-run" tests/fuzz/corpus >"$log" 2>&1 || rc=$?
  grep -E '^(Done |stat::number_of_executed_units|stat::average_exec_per_sec|SUMMARY|uma_fuzz: )' \
    "$log" || true
  # The wire target (remote types through CAF's deserializer and the gateway's checks).
  echo "=== fuzz: uma_wire_fuzz for $seconds s (log: $root/fuzz/wire-run.log)"
  mkdir -p "$root/fuzz/wire-corpus-run"
  "$root/fuzz/tests/fuzz/uma_wire_fuzz" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$root/fuzz/wire-" "$root/fuzz/wire-corpus-run" \
    tests/fuzz/wire-corpus >"$root/fuzz/wire-run.log" 2>&1 || rc=$?
  grep -E '^(Done |stat::number_of_executed_units|stat::average_exec_per_sec|SUMMARY|uma_wire_fuzz: )' \
    "$root/fuzz/wire-run.log" || true
  # The resource-stack target (allocation sequences on the CAF-free memory layer, in-process).
  echo "=== fuzz: uma_stack_fuzz for $seconds s (log: $root/fuzz/stack-run.log)"
  mkdir -p "$root/fuzz/stack-corpus-run"
  "$root/fuzz/tests/fuzz/uma_stack_fuzz" -max_total_time="$seconds" -timeout=30 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$root/fuzz/stack-" \
    "$root/fuzz/stack-corpus-run" tests/fuzz/stack-corpus >"$root/fuzz/stack-run.log" 2>&1 || rc=$?
  grep -E '^(Done |stat::number_of_executed_units|stat::average_exec_per_sec|SUMMARY|uma_stack_fuzz: )' \
    "$root/fuzz/stack-run.log" || true
  if [ "$rc" -ne 0 ]; then
    tail -n 60 "$log"
    return "$rc"
  fi
}

run_tests() {
  local name=$1
  echo "=== tests: $name"
  ctest --test-dir "$root/$name" -j "$jobs" --output-on-failure --timeout 300
}

case "${1:-}" in
  deps)
    install_deps ;;
  demo)
    install_deps
    configure release
    "$root/release/uma" demo ;;
  test)
    install_deps
    configure release -DUMA_BUILD_TESTS=ON -DUMA_WERROR=ON
    configure asan -DUMA_BUILD_TESTS=ON -DUMA_WITH_CUDA=OFF -DUMA_SANITIZE=address,undefined \
      -DCMAKE_BUILD_TYPE=Debug -DUMA_WERROR=ON
    build_target tsan uma_reliability_tests -DUMA_SANITIZE=thread -DUMA_WERROR=ON
    build_target fuzz uma_fuzz -DCMAKE_CXX_COMPILER=clang++ -DUMA_BUILD_FUZZERS=ON \
      -DUMA_SANITIZE=fuzzer-no-link,address,undefined -DUMA_WERROR=ON
    cmake --build "$root/fuzz" -j "$jobs" --target uma_wire_fuzz
    cmake --build "$root/fuzz" -j "$jobs" --target uma_stack_fuzz
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    run_tests asan
    run_tests release
    run_tsan
    run_fuzz ;;
  *)
    sed -n '2,9p' "$0"; exit 2 ;;
esac
