# Sourced by the tools' run scripts: starts a real ferry-master on 127.0.0.1 with a free port.
#   start_master BUILD_DIR WORK_DIR [PORT [HTTP_PORT]]  ->  sets master_pid and port (and http_port,
#   dashboard_url with HTTP_PORT); the log is WORK_DIR/master.log (appended to). PORT: listen there
#   (a master started again), else a free port. HTTP_PORT: serve the dashboard there (0: a free port).
start_master() {
  local build=$1 work=$2 listen=${3:-0} http=${4:-}
  local args=(--listen "127.0.0.1:$listen" --log-level info)
  [[ -n $http ]] && args+=(--http "127.0.0.1:$http")
  # Port 0: the master picks a free port and prints it.
  "$build/tools/master/ferry-master" "${args[@]}" >"$work/master.out" 2>>"$work/master.log" &
  master_pid=$!
  port=
  for _ in $(seq 200); do
    port=$(sed -n 's/^ferry-master listening on .*:\([0-9]*\)$/\1/p' "$work/master.out")
    dashboard_url=$(sed -n 's/^ferry-master dashboard at //p' "$work/master.out")
    http_port=$(sed -n 's/^ferry-master dashboard at .*:\([0-9]*\)\/$/\1/p' "$work/master.out")
    [[ -n $port && ( -z $http || -n $http_port ) ]] && return 0
    sleep 0.05
  done
  echo "ferry-master did not start:"
  cat "$work/master.log"
  return 1
}
