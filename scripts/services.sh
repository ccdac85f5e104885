#!/usr/bin/env bash
# Brings up the PostgreSQL and Redis that capacityd and its tests need, and
# writes their URLs to .data/env (source it). In order of preference:
#   1. DATABASE_URL / REDIS_URL (and TEST_DATABASE_URL / TEST_REDIS_URL for
#      the tests) when set: each one set must work, or the script stops
#      with its reason and writes nothing; it never puts another server or
#      database in the place of a setting. TEST_DATABASE_URL defaults to
#      DATABASE_URL, and TEST_REDIS_URL to REDIS_URL, when only those are set;
#   2. servers already listening on 127.0.0.1:5432 / 127.0.0.1:6379;
#   3. docker compose (with docker-compose.ports.yml, which publishes the
#      ports on 127.0.0.1), where a Docker engine runs;
#   4. private instances from local server binaries under ./.data, installing
#      Debian's postgresql and redis-server packages first when missing (root).
# The server binaries are installed in every case when missing and root: the
# fault tests start private servers of their own.
#
# CAPACITYD_SERVICES=private skips 2-3 (to try the fallback).
# CAPACITYD_SERVICES_ENV (default .data/env) is for the tests.
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

# shown URL prints URL without its password.
shown() { sed -E 's#^([a-z]+://[^:/@]*):[^@/]*@#\1:***@#' <<<"$1"; }

# one_line joins the lines of its input, squeezing blanks.
one_line() { tr '\n\t' '  ' | sed -E 's/ +/ /g; s/^ //; s/ $//'; }

# refuse NAME URL REASON HINT stops the script: the setting NAME does not
# work, and nothing takes its place.
refuse() {
  log "$1 is set to $(shown "$2"), which does not work:"
  log "  $3"
  log "$4; or unset $1 to let scripts/services.sh find or start a local server. Nothing else is used in its place."
  exit 1
}

# libpq_url URL drops the query parameters of a postgres:// URL that
# libpq (so psql) does not take and pgx does (pool_max_conns,
# default_query_exec_mode, runtime parameters such as search_path): they do
# not change which server and database it names.
libpq_url() {
  local url=$1 base query p kept=""
  [[ "$url" == *://*\?* ]] || { echo "$url"; return; }
  base=${url%%\?*} query=${url#*\?}
  local IFS='&'
  for p in $query; do
    case "${p%%=*}" in
      host | hostaddr | port | dbname | user | password | passfile | connect_timeout | options | application_name | \
        sslmode | sslcert | sslkey | sslpassword | sslrootcert | sslcrl | sslsni | channel_binding | gssencmode | \
        krbsrvname | target_session_attrs | service) kept="$kept${kept:+&}$p" ;;
    esac
  done
  echo "$base${kept:+?$kept}"
}

# require_postgres NAME checks the PostgreSQL URL in the variable NAME:
# the server answers and the database exists, or the script stops.
require_postgres() {
  local url=${!1} out
  have psql || refuse "$1" "$url" "psql is not installed, so it cannot be checked" \
    "Install psql (Debian package postgresql-client)"
  out=$(PGCONNECT_TIMEOUT=3 psql "$(libpq_url "$url")" -Atqc 'select 1' 2>&1 </dev/null) && return 0
  out=$(one_line <<<"$out")
  if [[ "$out" == *"database \""*"\" does not exist"* ]]; then
    refuse "$1" "$url" "$out" "Create that database (CREATE DATABASE …) or correct $1"
  fi
  refuse "$1" "$url" "$out" "Start that server or correct $1"
}

# require_redis NAME checks the Redis URL in the variable NAME: the
# server answers PING (with the URL's credentials and database), or the
# script stops.
require_redis() {
  local url=${!1} out hostport port=6379
  if have redis-cli; then
    # redis-cli prints PONG even after a failed AUTH or SELECT; those
    # print an error first.
    out=$(timeout 5 redis-cli --no-auth-warning -u "$url" ping 2>&1 </dev/null) || true
    [ "$out" = PONG ] && return 0
    [ -n "$out" ] || out="no answer within 5s"
  else
    hostport=${url#*://} hostport=${hostport##*@} hostport=${hostport%%/*}
    [[ "$hostport" != *:* ]] || port=${hostport##*:}
    redis_pong "${hostport%:*}" "$port" && return 0
    out="no PONG from $hostport"
  fi
  refuse "$1" "$url" "$(grep -v '^PONG$' <<<"$out" | one_line)" "Start that server or correct $1"
}

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
  # Settings given are checked first: each one set must work.
  local name
  for name in DATABASE_URL TEST_DATABASE_URL; do
    [ -z "${!name:-}" ] || require_postgres "$name"
  done
  for name in REDIS_URL TEST_REDIS_URL; do
    [ -z "${!name:-}" ] || require_redis "$name"
  done
  local db_url=${DATABASE_URL:-} test_db_url=${TEST_DATABASE_URL:-}
  local redis_url=${REDIS_URL:-} test_redis_url=${TEST_REDIS_URL:-}
  [ -n "$test_db_url" ] || test_db_url=$db_url
  [ -n "$test_redis_url" ] || test_redis_url=$redis_url
  PG_BASE="" REDIS_BASE=""
  local only_private=""
  [ "${CAPACITYD_SERVICES:-}" = private ] && only_private=1

  # Only what is not set is found or started.
  if [ -n "$db_url" ] && [ -n "$test_db_url" ]; then
    log "PostgreSQL: DATABASE_URL${TEST_DATABASE_URL:+, TEST_DATABASE_URL}"
  elif [ -n "$only_private" ]; then
    start_private_pg
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
    if [ -z "$db_url" ]; then
      create_db "$PG_BASE/postgres" capacityd
      db_url="$PG_BASE/capacityd?sslmode=disable"
    fi
    if [ -z "$test_db_url" ]; then
      create_db "$PG_BASE/postgres" capacityd_test
      test_db_url="$PG_BASE/capacityd_test?sslmode=disable"
    fi
  fi

  if [ -n "$redis_url" ] && [ -n "$test_redis_url" ]; then
    log "Redis: REDIS_URL${TEST_REDIS_URL:+, TEST_REDIS_URL}"
  elif [ -n "$only_private" ]; then
    start_private_redis
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
    [ -n "$redis_url" ] || redis_url="$REDIS_BASE/0"
    [ -n "$test_redis_url" ] || test_redis_url="$REDIS_BASE/1"
  fi

  local env_file=${CAPACITYD_SERVICES_ENV:-$DATA/env}
  cat >"$env_file" <<ENV
export DATABASE_URL='$db_url'
export TEST_DATABASE_URL='$test_db_url'
export REDIS_URL='$redis_url'
export TEST_REDIS_URL='$test_redis_url'
ENV
  log "wrote $env_file"
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
