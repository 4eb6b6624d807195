# Sourced by the tools' run scripts: starts a real ferry-master on 127.0.0.1 with a free port.
#   start_master BUILD_DIR WORK_DIR [PORT]  ->  sets master_pid and port; the log is WORK_DIR/master.log
#   (appended to). PORT: listen there (a master started again), else a free port.
start_master() {
  local build=$1 work=$2 listen=${3:-0}
  # Port 0: the master picks a free port and prints it.
  "$build/tools/master/ferry-master" --listen "127.0.0.1:$listen" --log-level info >"$work/master.out" \
    2>>"$work/master.log" &
  master_pid=$!
  port=
  for _ in $(seq 200); do
    port=$(sed -n 's/^ferry-master listening on .*:\([0-9]*\)$/\1/p' "$work/master.out")
    [[ -n $port ]] && return 0
    sleep 0.05
  done
  echo "ferry-master did not start:"
  cat "$work/master.log"
  return 1
}
