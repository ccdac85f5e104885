#!/usr/bin/env bash
# Brings up the PostgreSQL and Redis that capacityd and its tests need, and
# writes their URLs to .data/env (source it). In order of preference:
#   1. DATABASE_URL / REDIS_URL when set and reachable;
#   2. servers already listening on 127.0.0.1:5432 / 127.0.0.1:6379;
#   3. docker compose (with docker-compose.ports.yml, which publishes the
#      ports on 127.0.0.1), where a Docker engine runs;
#   4. private instances from local server binaries under ./.data, installing
#      Debian's postgresql and redis-server packages first when missing (root).
# The server binaries are installed in every case when missing and root: the
# fault tests start private servers of their own.
#
# CAPACITYD_SERVICES=private skips 1-3 (to try the fallback).
#
# `tools CMD:PKG ...` installs Debian's package PKG for each command CMD
# that is missing (when root; otherwise it says how), e.g. chromium for
# the widget tests and promtool for make lint.
#
# Usage: scripts/services.sh up | down | tools CMD:PKG ...
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="$PWD/.data"
mkdir -p "$DATA"

log() { echo "services: $*" >&2; }
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
is_root() { [ "$(id -u)" = 0 ]; }

apt_install() {
  is_root && have apt-get || return 1
  if [ ! -f "$DATA/.apt-updated" ]; then
    log "apt-get update"
    apt-get update -qq >/dev/null && touch "$DATA/.apt-updated"
  fi
  log "installing $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

pg_bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

redis_pong() { # host port
  (exec 3<>"/dev/tcp/$1/$2" && printf 'PING\r\n' >&3 && IFS= read -r -t 2 line <&3 && [[ "$line" == +PONG* ]]) 2>/dev/null
}

docker_ok() { have docker && docker info >/dev/null 2>&1; }

ensure_binaries() {
  if [ -z "$(pg_bindir)" ] || ! have psql; then
    apt_install postgresql postgresql-client || log "PostgreSQL binaries missing and not installable (not root?)"
  fi
  if ! have redis-server; then
    apt_install redis-server || log "redis-server missing and not installable (not root?)"
  fi
}

psql_ok() { PGCONNECT_TIMEOUT=3 psql "$1" -Atqc 'select 1' >/dev/null 2>&1; }

create_db() { # admin-url name
  local exists
  exists=$(psql "$1" -Atqc "select 1 from pg_database where datname = '$2'")
  [ "$exists" = 1 ] || psql "$1" -qc "create database $2" >/dev/null
}

start_private_pg() {
  local bindir port dir
  bindir=$(pg_bindir)
  [ -n "$bindir" ] || { log "no PostgreSQL server binaries"; return 1; }
  dir="$DATA/pg"
  port=$(cat "$DATA/pg.port" 2>/dev/null || echo 55432)
  echo "$port" >"$DATA/pg.port"
  local as=()
  if is_root; then
    as=(runuser -u postgres --)
    # PostgreSQL will not run as root; its user must reach the data folder.
    if ! runuser -u postgres -- test -x "$DATA"; then
      dir="/var/tmp/capacityd-$(echo "$DATA" | md5sum | cut -c1-12)/pg"
      mkdir -p "$(dirname "$dir")"
      echo "$dir" >"$DATA/pg.dir"
    fi
  fi
  if [ ! -f "$dir/PG_VERSION" ]; then
    mkdir -p "$dir"
    is_root && chown postgres:postgres "$dir"
    chmod 700 "$dir"
    log "initdb $dir"
    "${as[@]}" "$bindir/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 >/dev/null
  fi
  if ! port_open 127.0.0.1 "$port"; then
    log "starting private PostgreSQL on 127.0.0.1:$port"
    "${as[@]}" "$bindir/pg_ctl" -D "$dir" -l "$dir/server.log" -w \
      -o "-p $port -k /tmp -c listen_addresses=127.0.0.1" start >/dev/null
  fi
  PG_BASE="postgres://postgres@127.0.0.1:$port"
}

start_private_redis() {
  local port
  port=$(cat "$DATA/redis.port" 2>/dev/null || echo 56379)
  echo "$port" >"$DATA/redis.port"
  if ! redis_pong 127.0.0.1 "$port"; then
    have redis-server || { log "no redis-server"; return 1; }
    log "starting private Redis on 127.0.0.1:$port"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
      --pidfile "$DATA/redis.pid" --logfile "$DATA/redis.log" --dir "$DATA"
    for _ in $(seq 50); do redis_pong 127.0.0.1 "$port" && break; sleep 0.1; done
  fi
  REDIS_BASE="redis://127.0.0.1:$port"
}

up() {
  ensure_binaries
  local db_url="" test_db_url="" redis_url="" test_redis_url=""
  PG_BASE="" REDIS_BASE=""
  local only_private=""
  [ "${CAPACITYD_SERVICES:-}" = private ] && only_private=1

  if [ -n "$only_private" ]; then
    start_private_pg
  elif [ -n "${DATABASE_URL:-}" ] && psql_ok "$DATABASE_URL"; then
    log "PostgreSQL: DATABASE_URL"
    db_url=$DATABASE_URL
    test_db_url=${TEST_DATABASE_URL:-$DATABASE_URL}
  elif port_open 127.0.0.1 5432 && psql_ok "postgres://postgres@127.0.0.1:5432/postgres"; then
    log "PostgreSQL: 127.0.0.1:5432"
    PG_BASE="postgres://postgres@127.0.0.1:5432"
  elif docker_ok; then
    log "PostgreSQL: docker compose"
    docker compose -f docker-compose.yml -f docker-compose.ports.yml up -d --wait postgres >&2
    PG_BASE="postgres://postgres:postgres@127.0.0.1:5432"
  else
    start_private_pg
  fi
  if [ -n "$PG_BASE" ]; then
    create_db "$PG_BASE/postgres" capacityd
    create_db "$PG_BASE/postgres" capacityd_test
    db_url="$PG_BASE/capacityd?sslmode=disable"
    test_db_url="$PG_BASE/capacityd_test?sslmode=disable"
  fi

  if [ -n "$only_private" ]; then
    start_private_redis
  elif [ -n "${REDIS_URL:-}" ]; then
    log "Redis: REDIS_URL"
    redis_url=$REDIS_URL
    test_redis_url=${TEST_REDIS_URL:-$REDIS_URL}
  elif redis_pong 127.0.0.1 6379; then
    log "Redis: 127.0.0.1:6379"
    REDIS_BASE="redis://127.0.0.1:6379"
  elif docker_ok; then
    log "Redis: docker compose"
    docker compose -f docker-compose.yml -f docker-compose.ports.yml up -d --wait redis >&2
    REDIS_BASE="redis://127.0.0.1:6379"
  else
    start_private_redis
  fi
  if [ -n "$REDIS_BASE" ]; then
    redis_url="$REDIS_BASE/0"
    test_redis_url="$REDIS_BASE/1"
  fi

  cat >"$DATA/env" <<ENV
export DATABASE_URL='$db_url'
export TEST_DATABASE_URL='$test_db_url'
export REDIS_URL='$redis_url'
export TEST_REDIS_URL='$test_redis_url'
ENV
  log "wrote $DATA/env"
}

down() {
  if [ -f "$DATA/redis.pid" ]; then kill "$(cat "$DATA/redis.pid")" 2>/dev/null || true; rm -f "$DATA/redis.pid"; fi
  local dir="$DATA/pg"
  [ -f "$DATA/pg.dir" ] && dir=$(cat "$DATA/pg.dir")
  if [ -f "$dir/PG_VERSION" ]; then
    local as=(); is_root && as=(runuser -u postgres --)
    "${as[@]}" "$(pg_bindir)/pg_ctl" -D "$dir" -m fast stop >/dev/null 2>&1 || true
  fi
  if docker_ok && [ -f docker-compose.yml ]; then docker compose down >&2 || true; fi
}

tools() {
  local spec cmd pkg
  for spec in "$@"; do
    cmd=${spec%%:*} pkg=${spec#*:}
    have "$cmd" && continue
    apt_install "$pkg" || log "$cmd is missing and could not be installed: as root, apt-get install $pkg"
  done
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  tools) shift; tools "$@" ;;
  *) echo "usage: $0 up|down|tools CMD:PKG ..." >&2; exit 2 ;;
esac
