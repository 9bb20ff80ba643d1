#!/usr/bin/env bash
# uma's one entry point on a fresh Debian 12 machine: installs what is missing, builds, runs.
#
#   tools/setup.sh demo    install, build (release), run `uma demo` on the default backend
#   tools/setup.sh test    install, build release + ASan/UBSan, run the whole test suite in both
#   tools/setup.sh deps    install the Debian packages only
#
# Environment: UMA_JOBS (parallel build jobs, default: nproc), UMA_BUILD_ROOT (default: build).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake make g++ pkg-config libcaf-dev libboost1.81-dev libgtest-dev libgmock-dev
          libbenchmark-dev)
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
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# configure NAME [cmake args...]: a build tree under $root/NAME
configure() {
  local name=$1; shift
  cmake -S . -B "$root/$name" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$root/$name" -j "$jobs"
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
    configure release -DUMA_BUILD_TESTS=ON
    configure asan -DUMA_BUILD_TESTS=ON -DUMA_WITH_CUDA=OFF -DUMA_SANITIZE=address,undefined \
      -DCMAKE_BUILD_TYPE=Debug
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    run_tests asan
    run_tests release ;;
  *)
    sed -n '2,9p' "$0"; exit 2 ;;
esac
