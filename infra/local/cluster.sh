#!/usr/bin/env bash
# A local fleet on this machine, in the background: Redis, N gateway nodes, HAProxy in front. Loopback only.
#
#   infra/local/cluster.sh start           start it, wait until it serves, print addresses and pids (make cluster N=3)
#   infra/local/cluster.sh stop            stop exactly the pids that start recorded (make cluster-stop)
#   infra/local/cluster.sh render-haproxy  print the HAProxy config that start would write (infra/test checks it)
#
# Environment:
#   N              gateway nodes, on PORT+1 .. PORT+N (default 3)
#   PORT           the load balancer's port (default 38246)
#   REDIS_CLUSTER  1: a 3-master Redis Cluster (nodes get REDIS_CLUSTER_NODES) instead of one redis-server (REDIS_URL)
#   LB_CLIENTS     WebSocket clients the load balancer must hold at once (default 60000), see lb_plan
#   STATS_PORT     HAProxy's stats page (default: a free port)
#   READY_TIMEOUT  seconds to wait for each step (default 60)
#   Anything else (HERALD_CONFIG, HERALD_JWT_SECRET, MONGODB_URL, LOG_LEVEL, ...) is passed on to the nodes.
#
# Files, all under .run/cluster/: pids (one line per process: name pid address), node-<i>.log,
# redis-<port>/ and redis-<port>.log, haproxy.cfg, haproxy-<k>.log.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
PATH=$PATH:/usr/sbin  # haproxy, for users whose PATH lacks it
run_dir=$root/.run/cluster
pid_file=$run_dir/pids
template=$root/infra/haproxy/haproxy.cfg.tmpl

N=${N:-3}
PORT=${PORT:-38246}
LB_CLIENTS=${LB_CLIENTS:-60000}
READY_TIMEOUT=${READY_TIMEOUT:-60}
STOP_TIMEOUT=10

say() { printf '%s\n' "$*"; }
die() { printf 'cluster: %s\n' "$*" >&2; exit 1; }
rel() { printf '%s' "${1#"$root"/}"; }

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

port_free() { [[ -z $(ss -Hltn "sport = :$1") ]]; }

# A free port below the kernel's ephemeral range (32768+), so no outgoing connection holds it either.
# With `bus`, port+10000 must be free too (a Redis Cluster node's bus port).
free_port() {
  local need_bus=${1:-} p tries
  for ((tries = 0; tries < 200; tries++)); do
    p=$((20000 + RANDOM % 10000))
    port_free "$p" || continue
    [[ -z $need_bus ]] || port_free $((p + 10000)) || continue
    printf '%s' "$p"
    return 0
  done
  die "found no free port in 20000-29999"
}

# HTTP status of a GET, 000 when nothing answers. curl if present, else Node's fetch.
http_status() {
  if command -v curl >/dev/null; then
    curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1" || true
  else
    node -e 'fetch(process.argv[1], { signal: AbortSignal.timeout(2000) })
      .then((r) => console.log(r.status), () => console.log("000"))' "$1"
  fi
}

alive() { kill -0 "$1" 2>/dev/null; }

# True when pid is still the process this script started (pids get reused): the same program, in its
# working directory (redis-server moves to its --dir; the others stay in $root), redis on the recorded port.
is_ours() {
  local name=$1 pid=$2 cmdline cwd
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null) || return 1
  case $name in
    redis-*) [[ $cwd == "$run_dir/$name" && $cmdline == *redis-server*":${name#redis-}"* ]] ;;
    node-*) [[ $cwd == "$root" && $cmdline == *packages/gateway/src/main.ts* ]] ;;
    haproxy-*) [[ $cwd == "$root" && $cmdline == *haproxy*"$run_dir/haproxy.cfg"* ]] ;;
    *) return 1 ;;
  esac
}

record() { printf '%s %s %s\n' "$1" "$2" "$3" >>"$pid_file"; }

# Wait until the command succeeds, at most READY_TIMEOUT seconds; fail early if pid (when given) dies.
wait_for() {
  local what=$1 pid=$2 log=$3
  shift 3
  local deadline=$((SECONDS + READY_TIMEOUT))
  until "$@"; do
    if [[ -n $pid ]] && ! alive "$pid"; then
      say "$what exited while starting; last lines of $(rel "$log"):" >&2
      tail -n 20 "$log" >&2 || true
      return 1
    fi
    if ((SECONDS >= deadline)); then
      say "$what not ready after ${READY_TIMEOUT} s; last lines of $(rel "$log"):" >&2
      tail -n 20 "$log" >&2 || true
      return 1
    fi
    sleep 0.2
  done
}

# --- HAProxy -------------------------------------------------------------------------------------------

# The soft open-file limit up to the hard one, for this shell and every process it starts.
raise_fd_limit() { ulimit -n "$(ulimit -Hn)" 2>/dev/null || true; }

# Connections per HAProxy process and how many processes. Each proxied connection takes two file
# descriptors (client and server side) and HAProxy refuses to start when its maxconn needs more than the
# open-file limit allows it to raise to. Where one process cannot hold LB_CLIENTS, several run on the same
# port (SO_REUSEPORT). Prints "maxconn procs fd_limit".
lb_plan() {
  local fds per procs
  fds=$(ulimit -n)
  if [[ $fds == unlimited ]]; then fds=1048576; fi
  per=$(((fds - 500) / 2))
  ((per <= LB_CLIENTS)) || per=$LB_CLIENTS
  ((per >= 100)) || die "the open-file limit ($fds) is too low for HAProxy"
  procs=$(((LB_CLIENTS + per - 1) / per))
  printf '%s %s %s' "$per" "$procs" "$fds"
}

# The template with its placeholders filled in: PORT, STATS_PORT, N nodes on PORT+1.., maxconn ($1).
# Its `##` lines are notes on the template itself and are left out.
render_haproxy() {
  local maxconn=$1 line i
  [[ -r $template ]] || die "no template $template"
  while IFS= read -r line || [[ -n $line ]]; do
    [[ $line != '##'* ]] || continue
    if [[ $line == '@@SERVERS@@' ]]; then
      for ((i = 1; i <= N; i++)); do
        printf '    server node-%d 127.0.0.1:%d\n' "$i" $((PORT + i))
      done
      continue
    fi
    line=${line//@@PORT@@/$PORT}
    line=${line//@@STATS_PORT@@/$STATS_PORT}
    line=${line//@@MAXCONN@@/$maxconn}
    printf '%s\n' "$line"
  done <"$template"
}

# --- start ---------------------------------------------------------------------------------------------

# Only the processes recorded so far, so that a failed start leaves nothing behind.
cleanup_failed_start() {
  local status=$?
  if ((status != 0)) && [[ -f $pid_file ]]; then
    say "cluster: start failed; stopping what it started" >&2
    stop_all >&2 || true
  fi
  exit "$status"
}

start_redis_server() { # port [extra redis-server args...]
  local port=$1 dir=$run_dir/redis-$1 log=$run_dir/redis-$1.log pid
  shift
  mkdir -p "$dir"
  setsid redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --save '' --appendonly no \
    --daemonize no "$@" </dev/null >>"$log" 2>&1 &
  pid=$!
  record "redis-$port" "$pid" "127.0.0.1:$port"
  wait_for "redis-server on $port" "$pid" "$log" redis_pong "$port"
  printf '%-12s %-22s pid %-8s log %s\n' "redis-$port" "127.0.0.1:$port" "$pid" "$(rel "$log")"
}

redis_pong() { [[ $(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null) == PONG ]]; }

cluster_ok() { redis-cli -h 127.0.0.1 -p "$1" cluster info 2>/dev/null | grep -q '^cluster_state:ok'; }

# Checked before any arithmetic: bash evaluates what a variable holds inside (( )).
check_params() {
  if ! is_uint "$N" || ((N < 1 || N > 64)); then die "N must be 1-64, got '$N'"; fi
  if ! is_uint "$PORT" || ((PORT < 1024 || PORT + N > 65535)); then die "PORT must be 1024-$((65535 - N)), got '$PORT'"; fi
  if ! is_uint "$LB_CLIENTS" || ((LB_CLIENTS < 1)); then die "LB_CLIENTS must be a positive integer, got '$LB_CLIENTS'"; fi
  is_uint "$READY_TIMEOUT" || die "READY_TIMEOUT must be seconds, got '$READY_TIMEOUT'"
  if [[ -n ${STATS_PORT:-} ]] && ! is_uint "$STATS_PORT"; then die "STATS_PORT must be a port, got '$STATS_PORT'"; fi
}

start() {
  local tool
  for tool in node redis-server redis-cli haproxy ss setsid; do
    command -v "$tool" >/dev/null || die "$tool is not installed (make cluster installs redis and haproxy)"
  done

  if [[ -f $pid_file ]]; then
    local name pid running=0
    while read -r name pid _; do
      if alive "$pid" && is_ours "$name" "$pid"; then running=1; fi
    done <"$pid_file"
    ((running == 0)) || die "a local fleet is already running (pids in $(rel "$pid_file")); stop it first: make cluster-stop"
    say "cluster: removing a stale $(rel "$pid_file") (none of its processes is running)"
    rm -f "$pid_file"
  fi

  local i p
  for ((i = 0; i <= N; i++)); do
    p=$((PORT + i))
    port_free "$p" || die "port $p is in use ($( ((i == 0)) && echo 'load balancer' || echo "node-$i")); pick another base: PORT=<port> make cluster"
  done
  STATS_PORT=${STATS_PORT:-$(free_port)}

  raise_fd_limit
  local plan maxconn procs fds
  plan=$(lb_plan)
  read -r maxconn procs fds <<<"$plan"

  rm -rf "$run_dir"
  mkdir -p "$run_dir"
  : >"$pid_file"
  trap cleanup_failed_start EXIT

  # Redis: one server, or a 3-master cluster.
  local redis_env
  if [[ ${REDIS_CLUSTER:-} == 1 ]]; then
    local ports=() addrs=()
    for i in 1 2 3; do
      p=$(free_port bus)
      while [[ " ${ports[*]} " == *" $p "* ]]; do p=$(free_port bus); done
      ports+=("$p")
      addrs+=("127.0.0.1:$p")
      start_redis_server "$p" --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000 --cluster-require-full-coverage no
    done
    timeout "$READY_TIMEOUT" redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes \
      >"$run_dir/redis-cluster-create.log" 2>&1 \
      || { tail -n 20 "$run_dir/redis-cluster-create.log" >&2; die "redis-cli --cluster create failed"; }
    for p in "${ports[@]}"; do
      wait_for "Redis Cluster (cluster_state:ok on $p)" "" "$run_dir/redis-$p.log" cluster_ok "$p"
    done
    redis_env="REDIS_CLUSTER_NODES=$(IFS=,; printf '%s' "${addrs[*]}")"
  else
    p=$(free_port)
    start_redis_server "$p"
    redis_env="REDIS_URL=redis://127.0.0.1:$p"
  fi

  # Gateway nodes.
  local pids=() log pid
  for ((i = 1; i <= N; i++)); do
    p=$((PORT + i))
    log=$run_dir/node-$i.log
    setsid env -u REDIS_URL -u REDIS_CLUSTER_NODES "$redis_env" \
      PORT="$p" HOST=127.0.0.1 HERALD_NODE_ID="node-$i" NODE_COMPILE_CACHE="$root/.run/node-compile-cache" \
      node --no-node-snapshot --max-semi-space-size=16 packages/gateway/src/main.ts </dev/null >>"$log" 2>&1 &
    pid=$!
    pids+=("$pid")
    record "node-$i" "$pid" "127.0.0.1:$p"
  done
  for ((i = 1; i <= N; i++)); do
    p=$((PORT + i))
    wait_for "node-$i" "${pids[i - 1]}" "$run_dir/node-$i.log" ready "http://127.0.0.1:$p/readyz"
    printf '%-12s %-22s pid %-8s log %s\n' "node-$i" "127.0.0.1:$p" "${pids[i - 1]}" "$(rel "$run_dir/node-$i.log")"
  done

  # HAProxy: check the rendered config first, then start the processes.
  local cfg=$run_dir/haproxy.cfg k lb_pids=()
  render_haproxy "$maxconn" >"$cfg"
  haproxy -c -q -f "$cfg" >"$run_dir/haproxy-check.log" 2>&1 \
    || { cat "$run_dir/haproxy-check.log" >&2; die "haproxy rejected $(rel "$cfg")"; }
  for ((k = 1; k <= procs; k++)); do
    log=$run_dir/haproxy-$k.log
    setsid haproxy -db -f "$cfg" </dev/null >>"$log" 2>&1 &
    pid=$!
    lb_pids+=("$pid")
    record "haproxy-$k" "$pid" "127.0.0.1:$PORT"
  done
  wait_for "haproxy" "${lb_pids[0]}" "$run_dir/haproxy-1.log" ready "http://127.0.0.1:$PORT/readyz"
  for ((k = 1; k <= procs; k++)); do
    alive "${lb_pids[k - 1]}" || die "haproxy-$k exited; see $(rel "$run_dir/haproxy-$k.log")"
    printf '%-12s %-22s pid %-8s log %s\n' "haproxy-$k" "127.0.0.1:$PORT" "${lb_pids[k - 1]}" "$(rel "$run_dir/haproxy-$k.log")"
  done

  trap - EXIT
  say ""
  say "load balancer  http://127.0.0.1:$PORT  (ws://127.0.0.1:$PORT/?x-am-authorization=...)"
  say "stats          http://127.0.0.1:$STATS_PORT/stats"
  say "HAProxy        $procs process(es) x maxconn $maxconn (open-file limit $fds per process), leastconn, checks GET /readyz every 1 s"
  say "nodes          $N, each capped near $((fds - 100)) sockets by the same open-file limit"
  say "redis          ${redis_env}"
  say "pids           $(rel "$pid_file");  stop: make cluster-stop"
}

ready() { [[ $(http_status "$1") == 200 ]]; }

# --- stop ----------------------------------------------------------------------------------------------

# TERM the given "name pid" lines, wait up to STOP_TIMEOUT s, KILL what is left; report each.
stop_group() {
  local entry name pid termed=() left deadline
  for entry in "$@"; do
    read -r name pid <<<"$entry"
    if ! alive "$pid"; then
      say "$name (pid $pid): was not running"
    elif ! is_ours "$name" "$pid"; then
      say "$name (pid $pid): that pid is now another program; left alone"
    else
      kill -TERM "$pid" 2>/dev/null || true
      termed+=("$entry")
    fi
  done
  ((${#termed[@]} > 0)) || return 0
  deadline=$((SECONDS + STOP_TIMEOUT))
  while :; do
    left=0
    for entry in "${termed[@]}"; do
      read -r name pid <<<"$entry"
      if alive "$pid"; then left=1; fi
    done
    ((left == 1 && SECONDS < deadline)) || break
    sleep 0.1
  done
  for entry in "${termed[@]}"; do
    read -r name pid <<<"$entry"
    if alive "$pid" && is_ours "$name" "$pid"; then
      kill -KILL "$pid" 2>/dev/null || true
      say "$name (pid $pid): killed (still running ${STOP_TIMEOUT} s after TERM)"
    else
      say "$name (pid $pid): stopped"
    fi
  done
}

# HAProxy and the nodes first (nodes drain and may still talk to Redis), then Redis.
stop_all() {
  local name pid front=() back=()
  while read -r name pid _; do
    [[ -n ${pid:-} ]] || continue
    case $name in
      redis*) back+=("$name $pid") ;;
      *) front+=("$name $pid") ;;
    esac
  done <"$pid_file"
  ((${#front[@]} == 0)) || stop_group "${front[@]}"
  ((${#back[@]} == 0)) || stop_group "${back[@]}"
  rm -f "$pid_file"
  say "cluster: stopped; logs stay in $(rel "$run_dir")"
}

stop() {
  if [[ ! -f $pid_file ]]; then
    say "cluster: no local fleet is running (no $(rel "$pid_file"))"
    return 0
  fi
  stop_all
}

case ${1:-} in
  start)
    check_params
    start
    ;;
  stop) stop ;;
  render-haproxy)
    check_params
    raise_fd_limit
    STATS_PORT=${STATS_PORT:-$((PORT + 100))}
    plan=$(lb_plan)
    render_haproxy "${plan%% *}"
    ;;
  *) die "usage: $0 start|stop|render-haproxy" ;;
esac
