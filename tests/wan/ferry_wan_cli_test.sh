#!/bin/sh
# ferry-wan run --topology from the command line.
#   refusal FERRY_WAN: a malformed file is refused before anything is built (no root needed)
#   run FERRY_WAN TOPOLOGY: the command sees the file's hosts (root; skipped otherwise)
set -eu
mode=$1
wan=$2
case "$mode" in
  refusal)
    bad=$(mktemp)
    trap 'rm -f "$bad" "$bad.err"' EXIT
    printf '{"hosts": [\n  {"name": "a", "region": "x", "uplink": "10mbps"}\n]}\n' > "$bad"
    if "$wan" run --topology "$bad" -- true 2> "$bad.err"; then
      echo "accepted a malformed topology"; exit 1
    fi
    cat "$bad.err"
    grep -q "topology $bad: hosts\[0\] ('a'): bad uplink='10mbps'" "$bad.err"
    ;;
  run)
    if [ "$(id -u)" -ne 0 ]; then echo "FERRY_TEST_SKIPPED: not root"; exit 0; fi
    "$wan" run -q --topology "$3" -- sh -c \
      'test "$FERRY_WAN_HOSTS" = 6 && test "$FERRY_WAN_NAME_5" = apse1-b && test "$FERRY_WAN_REGION_2" = eu-west &&
       test "$FERRY_WAN_TOPOLOGY" = "'"$3"'" && test -z "${FERRY_WAN_SPEC:-}" && ip netns exec "$FERRY_WAN_NETNS_5" ip -4 addr show wan0 | grep -q 10.77.0.6'
    ;;
  *) echo "usage: $0 refusal|run FERRY_WAN [TOPOLOGY]"; exit 2 ;;
esac
