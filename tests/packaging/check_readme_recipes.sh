#!/usr/bin/env bash
# Runs the README's two C recipes (the blocks after "<!-- recipe: build-tree -->"
# and "<!-- recipe: installed-prefix -->") as written: each builds
# examples/c/hello.c, and the program it builds must run a whole (one-peer)
# run against a real ferry-master, loading libferry by the rpath the recipe
# gave it (LD_LIBRARY_PATH is cleared). The recipes run in a scratch folder
# that looks like the repository's root (examples/, include/ and build/ are
# links to the real ones) with HOME in it, so nothing outside it is written.
#   check_readme_recipes.sh BUILD_DIR SOURCE_DIR MASTER_BIN
# Environment: CC (the outer build's; the recipes say `cc`), SANITIZE (FERRY_SANITIZE).
set -euo pipefail
build=$1 source=$2 master_bin=$3
source "$(dirname "$0")/scratch_master.sh"

# The shell lines of the README's block named $1.
recipe() {
  awk -v name="<!-- recipe: $1 -->" '
    $0 == name { found = 1; next }
    found && /^```sh$/ { inside = 1; next }
    inside && /^```$/ { exit }
    inside { print }' "$source/README.md"
}

start_master "$master_bin"

# cc is the outer build's compiler (and its sanitizer, so hello can load an instrumented libferry).
mkdir "$tmp/bin"
sanitize=${SANITIZE:+-fsanitize=$SANITIZE}
printf '#!/bin/sh\nexec %q %s "$@"\n' "${CC:-cc}" "$sanitize" >"$tmp/bin/cc"
chmod +x "$tmp/bin/cc"

for name in build-tree installed-prefix; do
  script=$(recipe "$name")
  [[ -n $script ]] || fail "README.md has no block after <!-- recipe: $name -->"
  [[ $script == *127.0.0.1:48148* ]] || fail "$name: the recipe does not run ./hello against 127.0.0.1:48148"
  work=$tmp/$name
  mkdir -p "$work/home"
  ln -s "$source/examples" "$work/examples"
  ln -s "$source/include" "$work/include"
  ln -s "$build" "$work/build"
  echo "--- $name:"
  echo "$script"
  # The master the recipe names on the default port is the one started above, on a free port.
  (cd "$work" && env -u LD_LIBRARY_PATH -u PKG_CONFIG_PATH HOME="$work/home" PATH="$tmp/bin:$PATH" \
     bash -euo pipefail -c "${script//127.0.0.1:48148/$address}") >"$work/out" 2>&1 ||
    fail "$name: the recipe failed:
$(cat "$work/out")"
  grep -q "hash" "$work/out" || fail "$name: hello did not finish its run:
$(cat "$work/out")"
  echo "$name: hello built and ran a run against $address"
done
