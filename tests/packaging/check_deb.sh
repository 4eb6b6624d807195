#!/usr/bin/env bash
# Builds the Debian package (cpack -G DEB, cmake/FerryDebian.cmake) from a built tree and
# checks it as apt would see it, without installing it on this machine: its name and
# version; the files a user needs in it; every library its binaries load is in the
# package itself or in a package its Depends names; then, unpacked into a scratch root,
# hello.c builds against it through its pkg-config file, two peers run a run against
# its ferry-master, and its Python package imports and loads its libferry.
#   check_deb.sh BUILD_DIR SOURCE_DIR VERSION
# Environment: CC (the outer build's).
set -euo pipefail
build=$1 source=$2 version=$3
source "$(dirname "$0")/scratch_master.sh"

arch=$(dpkg --print-architecture)
(cd "$build" && cpack -G DEB -B "$tmp/out" >"$tmp/cpack.log" 2>&1) || fail "cpack: $(cat "$tmp/cpack.log")"
deb=$tmp/out/ferry_${version}_${arch}.deb
[[ -f $deb ]] || fail "no $deb; cpack made: $(ls "$tmp/out")"

field() { dpkg-deb --field "$deb" "$1"; }
[[ $(field Package) == ferry && $(field Version) == "$version" ]] ||
  fail "the package says $(field Package) $(field Version), want ferry $version"
depends=$(field Depends)
echo "Depends: $depends"

# The files a user of each part needs.
dpkg-deb --contents "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$tmp/files"
libdir=$(sed -n 's|^\(/usr/lib[^ ]*\)/libferry\.so\.0$|\1|p' "$tmp/files")
[[ -n $libdir ]] || fail "no libferry.so.0 in the package"
for f in "$libdir/libferry.so" /usr/include/ferry/ferry.h "$libdir/pkgconfig/ferry.pc" \
         "$libdir/cmake/ferry/ferry-config.cmake" /usr/bin/ferry-master /usr/bin/ferry-bench /usr/bin/ferry-chaos \
         /usr/lib/python3/dist-packages/ferry/__init__.py; do
  grep -qxF "$f" "$tmp/files" || fail "the package lacks $f"
done
! grep -q "__pycache__\|_bundled" "$tmp/files" || fail "the package carries __pycache__ or _bundled"

root=$tmp/root
dpkg-deb --extract "$deb" "$root"

# Every library an ELF file of the package loads: its own, or from a package that Depends names.
depends_names=" $(echo "$depends" | tr ',|' '\n\n' | sed 's/(.*)//; s/ //g' | tr '\n' ' ') "
while read -r elf; do
  while read -r lib path; do
    [[ $path == "$root"/* ]] && continue
    [[ -e $path ]] || fail "$elf needs $lib, which nothing here provides"
    owner=$(dpkg -S "$(realpath "$path")" 2>/dev/null | head -1 | cut -d: -f1) ||
      owner=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1) || true
    [[ -n $owner ]] || fail "$elf loads $path, which no Debian package owns"
    # Named itself, or by a virtual package it provides (libspdlog1.10 provides libspdlog1.10-fmt9).
    owner=${owner%%:*}
    provides=$(dpkg-query -W -f='${Provides}' "$owner" 2>/dev/null | tr ',' '\n' | sed 's/(.*)//; s/ //g')
    named=
    for name in "$owner" $provides; do [[ $depends_names == *" $name "* ]] && named=$name; done
    [[ -n $named ]] || fail "$elf loads $path from $owner, which Depends does not name"
  done < <(LD_LIBRARY_PATH=$root$libdir ldd "$elf" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
done < <(find "$root" -type f -exec sh -c 'head -c 4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
echo "every library the package's binaries load is its own or in its Depends"

# hello.c through the package's pkg-config file (relocatable: it points into the scratch root).
export PKG_CONFIG_PATH=$root$libdir/pkgconfig
[[ $(pkg-config --modversion ferry) == "$version" ]] || fail "ferry.pc in the package is not version $version"
read -r -a pc_flags <<<"$(pkg-config --cflags --libs ferry)"
"${CC:-cc}" -std=c99 "$source/examples/c/hello.c" "${pc_flags[@]}" -o "$tmp/hello" ||
  fail "cannot build hello.c with the package's flags: ${pc_flags[*]}"

export LD_LIBRARY_PATH=$root$libdir
start_master "$root/usr/bin/ferry-master"
"$tmp/hello" "$address" 2 3 4096 >"$tmp/peer0" 2>&1 & p0=$!
"$tmp/hello" "$address" 2 3 4096 >"$tmp/peer1" 2>&1 & p1=$!
wait "$p0" || fail "peer 0: $(cat "$tmp/peer0")"
wait "$p1" || fail "peer 1: $(cat "$tmp/peer1")"
h0=$(grep -o 'result hash [0-9a-f]*' "$tmp/peer0" | tail -1 || true) h1=$(grep -o 'result hash [0-9a-f]*' "$tmp/peer1" | tail -1 || true)
[[ -n $h0 && $h0 == "$h1" ]] || fail "the two peers did not end with one hash: $(cat "$tmp/peer0" "$tmp/peer1")"
echo "two hello peers ran a run against the package's ferry-master ($h0)"

# The Python package, as Debian's python3 sees it once installed: no FERRY_LIBRARY, no repository.
# Which libferry it loaded: the process's own map (the loader's name for it may be a bare soname).
probe='import ferry; print(ferry.__version__, ferry.library_version())
print(next(l.split()[-1] for l in open("/proc/self/maps") if "libferry.so" in l))'
out=$(cd "$tmp" && env -u FERRY_LIBRARY PYTHONPATH="$root/usr/lib/python3/dist-packages" /usr/bin/python3 -c "$probe" 2>&1) ||
  fail "import ferry: $out"
[[ $(sed -n 1p <<<"$out") == "$version $version" ]] || fail "the package's Python ferry and its libferry are not $version: $out"
[[ $(realpath "$(sed -n 2p <<<"$out")") == $(realpath "$root$libdir/libferry.so.0") ]] ||
  fail "the package's Python ferry loaded $(sed -n 2p <<<"$out"), not the package's libferry"
echo "the package's Python ferry $version loads the package's libferry"
