# Sourced by the packaging checks: a scratch folder ($tmp), fail, and start_master BIN, which
# starts a ferry-master on a free loopback port and sets master_pid and address (or fails,
# naming its stderr). The folder and the master go at exit.
tmp=$(mktemp -d)
master_pid=
cleanup() {
  [[ -n $master_pid ]] && kill "$master_pid" 2>/dev/null && wait "$master_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

start_master() {
  "$1" --listen 127.0.0.1:0 --log-level warn >"$tmp/master.out" 2>"$tmp/master.err" &
  master_pid=$!
  for _ in $(seq 150); do
    grep -q "listening on" "$tmp/master.out" 2>/dev/null && break
    sleep 0.1
  done
  address=$(sed -n 's/^ferry-master listening on //p' "$tmp/master.out")
  [[ -n $address ]] || fail "$1 did not start: $(cat "$tmp/master.err")"
}
