#!/usr/bin/env bash
# Restarts the capacityd instances behind HAProxy one at a time, through
# HAProxy's runtime API (the admin socket of deploy/haproxy/haproxy.cfg).
# For each instance, in the order of the backend:
#   1. check that another instance is UP on every proxy (never drain the last);
#   2. `set server <backend>/<name> state drain`: no new request goes to it;
#   3. wait until its sessions (and queue) are 0 on every proxy, at most
#      DRAIN seconds: open seat streams keep a session until the instance
#      stops, which ends them (browsers reconnect through the proxy);
#   4. run RESTART_COMMAND with CAPACITYD_SERVER (its name in HAProxy) and
#      CAPACITYD_ADDR (its host:port) in the environment;
#   5. wait until GET http://<host:port>/readyz answers 200, at most READY
#      seconds;
#   6. `set server <backend>/<name> state ready`, and wait until every proxy
#      holds it UP before the next one.
# When a step fails the script stops with the instance left in drain and
# says how to put it back.
#
# Usage: scripts/rolling-restart.sh [-s SOCKET]... [-b BACKEND] [-d DRAIN]
#          [-r READY] [-i SERVER]... -- RESTART_COMMAND [ARG...]
#   -s  an admin socket (`stats socket ... level admin`): a path, or host:port
#       for a TCP socket; once per proxy. Default: $HAPROXY_SOCKET, else
#       /run/haproxy/admin.sock.
#   -b  the instances' backend. Default: capacityd.
#   -d  seconds to wait for the sessions to end (default 60).
#   -r  seconds to wait for the restarted instance (default 120).
#   -i  restart only this server (once per server). Default: all of them.
#
# Example, on the proxy's host, with systemd on the instances' hosts:
#   scripts/rolling-restart.sh -- sh -c 'ssh "${CAPACITYD_ADDR%:*}" sudo systemctl restart capacityd'
#
# Needs socat and curl (Debian packages of the same names).
set -euo pipefail

log() { echo "rolling-restart: $(date +%T) $*" >&2; }
die() {
  log "$*"
  exit 1
}

sockets=()
backend=capacityd
drain_wait=60
ready_wait=120
only=()
while getopts "s:b:d:r:i:h" opt; do
  case $opt in
  s) sockets+=("$OPTARG") ;;
  b) backend=$OPTARG ;;
  d) drain_wait=$OPTARG ;;
  r) ready_wait=$OPTARG ;;
  i) only+=("$OPTARG") ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
    ;;
  esac
done
shift $((OPTIND - 1))
[ "$#" -gt 0 ] || die "no restart command: give it after --"
[ "${#sockets[@]}" -gt 0 ] || sockets=("${HAPROXY_SOCKET:-/run/haproxy/admin.sock}")
for tool in socat curl; do
  command -v "$tool" >/dev/null || die "$tool is required (Debian package $tool)"
done

# api SOCKET COMMAND: one command of the runtime API, its answer on stdout.
api() {
  local addr=unix-connect:$1
  [[ $1 == /* ]] || addr=tcp:$1
  echo "$2" | socat -t 5 stdio "$addr"
}

# servers: "name host port" of each server of the backend, from the first proxy.
servers() {
  api "${sockets[0]}" "show servers state $backend" | awk '
    /^# / { for (i = 2; i <= NF; i++) col[$i] = i - 1; next }
    NF > 3 && col["srv_name"] { print $col["srv_name"], $col["srv_addr"], $col["srv_port"] }'
}

# stat SOCKET SERVER: "status sessions queued" of a server on one proxy.
stat() {
  api "$1" "show stat" | awk -F, -v be="$backend" -v sv="$2" '
    /^# / { sub(/^# /, ""); for (i = 1; i <= NF; i++) col[$i] = i; next }
    $1 == be && $2 == sv { print $col["status"], $col["scur"], $col["qcur"] }'
}

# set_state SERVER STATE on every proxy.
set_state() {
  local sock out
  for sock in "${sockets[@]}"; do
    out=$(api "$sock" "set server $backend/$1 state $2") || die "$sock: the runtime API does not answer"
    [ -z "$(echo "$out" | tr -d '[:space:]')" ] || die "$sock: set server $backend/$1 state $2: $out"
  done
}

# others_up SERVER: whether every proxy holds another server of the backend UP.
others_up() {
  local sock
  for sock in "${sockets[@]}"; do
    api "$sock" "show stat" | awk -F, -v be="$backend" -v sv="$1" '
      /^# / { sub(/^# /, ""); for (i = 1; i <= NF; i++) col[$i] = i; next }
      $1 == be && $2 != sv && $2 != "BACKEND" && $col["status"] == "UP" { up = 1 }
      END { exit !up }' || return 1
  done
}

# wait_for SECONDS WHAT TEST...: runs TEST until it succeeds, at most SECONDS.
wait_for() {
  local limit=$1 what=$2 start=$SECONDS
  shift 2
  until "$@"; do
    [ $((SECONDS - start)) -lt "$limit" ] || return 1
    sleep 0.2
  done
  log "$what after $((SECONDS - start))s"
}

drained() {
  local sock s
  for sock in "${sockets[@]}"; do
    read -r _ sessions queued <<<"$(stat "$sock" "$1")"
    [ "${sessions:-1}" = 0 ] && [ "${queued:-1}" = 0 ] || return 1
  done
}

ready() { curl -fsS -o /dev/null --max-time 2 "http://$1/readyz" 2>/dev/null; }

up() {
  local sock status
  for sock in "${sockets[@]}"; do
    read -r status _ <<<"$(stat "$sock" "$1")"
    [ "$status" = UP ] || return 1
  done
}

list=$(servers) || die "${sockets[0]}: the runtime API does not answer"
[ -n "$list" ] || die "no servers in backend $backend on ${sockets[0]}"
count=0
while read -r name host port; do
  if [ "${#only[@]}" -gt 0 ] && ! printf '%s\n' "${only[@]}" | grep -qxF "$name"; then
    continue
  fi
  [[ $host == *:* ]] && host="[$host]" # IPv6
  addr=$host:$port
  back="put it back with: echo 'set server $backend/$name state ready' | socat stdio unix-connect:<socket>"

  others_up "$name" || die "$name: no other instance of $backend is UP on every proxy; not draining it"
  log "$name ($addr): drain"
  set_state "$name" drain
  wait_for "$drain_wait" "$name: no sessions left" drained "$name" ||
    log "$name: sessions still open after ${drain_wait}s (seat streams?); restarting anyway"

  log "$name: restart: $*"
  CAPACITYD_SERVER=$name CAPACITYD_ADDR=$addr "$@" </dev/null ||
    die "$name: the restart command failed; $name stays in drain; $back"
  wait_for "$ready_wait" "$name: /readyz answers 200" ready "$addr" ||
    die "$name: not ready after ${ready_wait}s; $name stays in drain; $back"

  set_state "$name" ready
  wait_for "$ready_wait" "$name: UP on every proxy" up "$name" ||
    die "$name: not UP on every proxy after ${ready_wait}s"
  count=$((count + 1))
done <<<"$list"
[ "$count" -gt 0 ] || die "none of ${only[*]} is a server of $backend"
log "restarted $count instance(s)"
