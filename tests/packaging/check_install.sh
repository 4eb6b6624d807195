#!/usr/bin/env bash
# Installs a build to a fresh prefix and builds examples/c/hello.c (and the
# version probe) against it the two documented ways: pkg-config, and a CMake
# project with find_package(ferry). Each program must then run against the
# installed library: hello without arguments prints its usage and exits 2 (it
# loaded libferry), the probe's ferry_version() must be the project's.
#   check_install.sh BUILD_DIR SOURCE_DIR LIBDIR VERSION
# Environment: CMAKE, CC, GENERATOR (the outer build's), SANITIZE (FERRY_SANITIZE,
# so a program can load an instrumented libferry).
set -euo pipefail
build=$1 source=$2 libdir=$3 version=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
flags=()
[[ -n ${SANITIZE:-} ]] && flags=("-fsanitize=$SANITIZE")

fail() { echo "FAIL: $*" >&2; exit 1; }

# Runs a built program: hello must refuse no arguments (exit 2, usage); the probe
# must print the version and agree with it.
run_programs() {
  local how=$1 dir=$2 rc=0 out
  out=$("$dir/hello" 2>&1) || rc=$?
  [[ $rc == 2 && $out == *usage:* ]] || fail "$how: hello without arguments: exit $rc, output: $out"
  out=$("$dir/version_probe" "$version" 2>&1) || fail "$how: version probe: $out"
  [[ $out == "$version" ]] || fail "$how: version probe printed '$out', want $version"
  echo "$how: hello and the version probe run against $prefix ($version)"
}

"$CMAKE" --install "$build" --prefix "$prefix" >/dev/null

# pkg-config, as a Makefile would use it.
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
pc_version=$(pkg-config --modversion ferry) || fail "pkg-config does not find ferry in $PKG_CONFIG_PATH"
[[ $pc_version == "$version" ]] || fail "ferry.pc says version $pc_version, want $version"
read -r -a pc_flags <<<"$(pkg-config --cflags --libs ferry)"
echo "pkg-config --cflags --libs ferry: ${pc_flags[*]}"
mkdir "$tmp/pc"
for program in hello version_probe; do
  src=$source/examples/c/hello.c
  [[ $program == version_probe ]] && src=$source/tests/packaging/version_probe.c
  "$CC" -std=c99 "${flags[@]}" "$src" "${pc_flags[@]}" -o "$tmp/pc/$program" ||
    fail "pkg-config: cannot build $program with: ${pc_flags[*]}"
done
# No rpath from pkg-config: the loader must be told where the prefix's library is.
LD_LIBRARY_PATH=$prefix/$libdir run_programs pkg-config "$tmp/pc"

# CMake: find_package(ferry) and ferry::ferry (which bring the library's rpath).
"$CMAKE" -S "$source/tests/packaging/consumer" -B "$tmp/cmake" -G "$GENERATOR" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$CC" -DCMAKE_C_FLAGS="${flags[*]}" \
  -DFERRY_EXPECTED_VERSION="$version" \
  -DFERRY_SOURCE_hello="$source/examples/c/hello.c" \
  -DFERRY_SOURCE_version_probe="$source/tests/packaging/version_probe.c" ||
  fail "find_package(ferry $version) with CMAKE_PREFIX_PATH=$prefix"
"$CMAKE" --build "$tmp/cmake" || fail "find_package: cannot build against ferry::ferry"
run_programs find_package "$tmp/cmake"
