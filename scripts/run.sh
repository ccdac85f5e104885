#!/usr/bin/env bash
# Runs capacityd for local use (make run): migrates, serves on
# 127.0.0.1:8080 (LISTEN_ADDR overrides it), makes sure the demo
# activities (one, one with a waiting list, two sharing a pool) exist,
# prints the demo URL, a one-time sign-in link to the console, tokens and
# curl examples, then serves until
# interrupted. Expects the variables of .data/env.
#
# Tokens are signed with CAPACITY_JWT_SECRET, or else with a random secret
# kept in .data/dev-secret (never the public --dev one); webhook secrets are
# sealed with WEBHOOK_SECRET_KEY, or else with a random key kept in
# .data/webhook-key. Webhook URLs on loopback and private addresses are
# allowed (WEBHOOK_ALLOW_PRIVATE=true unless set), so that a receiver on
# this machine gets deliveries; a production server refuses them by
# default. The demo activity's id is kept in .data/demo-activity (and the
# other demo objects' in .data/demo-*) and reused while the database still
# has it. It stops with the reason, and prints no banner,
# when the port is taken or capacityd exits.
#
# CAPACITYD_BIN and CAPACITYD_STATE (default bin/capacityd and .data) are
# for the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${CAPACITYD_BIN:-bin/capacityd}
STATE=${CAPACITYD_STATE:-.data}
ADDR=${LISTEN_ADDR:-127.0.0.1:8080}
HOST=${ADDR%:*}
PORT=${ADDR##*:}
case "$HOST" in "" | 0.0.0.0 | "[::]") HOST=127.0.0.1 ;; esac
BASE="http://$HOST:$PORT"

fail() { echo "make run: $*" >&2; exit 1; }

# Anything answering on the port is not ours: stop before starting.
if (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; then
  fail "port $PORT on $HOST is already in use by another program; free it or choose another address, e.g. LISTEN_ADDR=127.0.0.1:8081 make run"
fi

mkdir -p "$STATE"
TOKEN_CMD="$BIN token"
if [ -z "${CAPACITY_JWT_SECRET:-}" ]; then
  TOKEN_CMD="CAPACITY_JWT_SECRET=\$(cat $STATE/dev-secret) $BIN token"
  if [ ! -s "$STATE/dev-secret" ]; then
    (umask 077 && head -c 32 /dev/urandom | base64 | tr -d '\n=' >"$STATE/dev-secret")
  fi
  CAPACITY_JWT_SECRET=$(cat "$STATE/dev-secret")
  export CAPACITY_JWT_SECRET
fi

# Webhook secrets are sealed with WEBHOOK_SECRET_KEY, or else with a random
# key of its own kept in .data/webhook-key.
if [ -z "${WEBHOOK_SECRET_KEY:-}" ]; then
  if [ ! -s "$STATE/webhook-key" ]; then
    (umask 077 && head -c 32 /dev/urandom | base64 | tr -d '\n' >"$STATE/webhook-key")
  fi
  WEBHOOK_SECRET_KEY=$(cat "$STATE/webhook-key")
  export WEBHOOK_SECRET_KEY
fi

# A development server delivers webhooks to receivers on this machine.
WEBHOOK_ALLOW_PRIVATE=${WEBHOOK_ALLOW_PRIVATE:-true}
export WEBHOOK_ALLOW_PRIVATE
WEBHOOKS="receivers on loopback and private addresses allowed (WEBHOOK_ALLOW_PRIVATE=true, for local development; production refuses them)"
case "$WEBHOOK_ALLOW_PRIVATE" in
  true | 1 | t | T | TRUE | True) ;;
  *) WEBHOOKS="receivers on loopback and private addresses refused (WEBHOOK_ALLOW_PRIVATE=$WEBHOOK_ALLOW_PRIVATE)" ;;
esac

"$BIN" migrate >/dev/null || fail "capacityd migrate failed (is DATABASE_URL reachable?)"
ADMIN=$("$BIN" token --sub admin --admin --ttl 24h)
USER_TOKEN=$("$BIN" token --sub alice --ttl 24h)

# /metrics on the same address for local use, unless METRICS_ADDR gives it
# a listener of its own (as in production, where it defaults to
# 127.0.0.1:9090).
METRICS=${METRICS_ADDR:-api}
METRICS_URL="$BASE/metrics"
[ "$METRICS" = api ] || METRICS_URL="http://$METRICS/metrics"
"$BIN" serve --demo-signups on --listen-addr "$ADDR" --metrics-addr "$METRICS" &
PID=$!
trap 'kill -TERM $PID 2>/dev/null; wait $PID' INT TERM

# Wait for /healthz while capacityd is alive; it may exit at start (a bad
# setting, the port taken meanwhile, the database unreachable).
healthy=""
for _ in $(seq 300); do
  if ! kill -0 "$PID" 2>/dev/null; then
    code=0; wait "$PID" || code=$?
    fail "capacityd exited (status $code) before it was healthy; its log above says why"
  fi
  if curl -fs --max-time 1 "$BASE/healthz" >/dev/null 2>&1; then healthy=1; break; fi
  sleep 0.1
done
if [ -z "$healthy" ] || ! kill -0 "$PID" 2>/dev/null; then
  kill -TERM "$PID" 2>/dev/null || true
  fail "capacityd did not become healthy on $BASE within 30s"
fi

# demo_object NAME KIND BODY [HAS] prints the id of the demo object of
# /v1/KIND (activities, pools) kept in .data/NAME, creating it from BODY
# when the database no longer has it, or when its admin read (the
# authoritative one) lacks the text HAS (a pooled activity of a pool made
# anew).
demo_object() {
  local id body
  id=$(cat "$STATE/$1" 2>/dev/null || true)
  body=""
  [ -z "$id" ] || body=$(curl -fs --max-time 5 "$BASE/v1/$2/$id" -H "Authorization: Bearer $ADMIN") || body=""
  if [ -z "$body" ] || [[ "$body" != *"${4:-}"* ]]; then
    id=$(curl -fs --max-time 5 -X POST "$BASE/v1/$2" -H "Authorization: Bearer $ADMIN" -d "$3" |
      sed -E 's/.*"id":"([^"]+)".*/\1/') || return 1
    [[ "$id" =~ ^[ap]_[0-9A-Z]{26}$ ]] || return 1
    echo "$id" >"$STATE/$1"
  fi
  echo "$id"
}
demo_activity() { demo_object "$1" activities "$2" "${3:-}"; }
DEMO=$(demo_activity demo-activity '{"title":"Cardiology grand rounds (demo)","capacity":20}') ||
  { kill -TERM "$PID"; fail "could not create the demo activity"; }
WAITLIST=$(demo_activity demo-party-waitlist-activity \
  '{"title":"Journal club (demo, with a waiting list)","capacity":6,"waitlist":true,"max_seats_per_registration":4}') ||
  { kill -TERM "$PID"; fail "could not create the demo activity with a waiting list"; }
# Two activities sharing the seats of one pool: a signup to either lowers
# both counters.
POOL=$(demo_object demo-pool pools '{"title":"Main hall","capacity":30}') ||
  { kill -TERM "$PID"; fail "could not create the demo pool"; }
SYMPOSIUM=$(demo_activity demo-pool-symposium \
  '{"title":"Symposium (demo)","capacity":30,"pools":["'"$POOL"'"]}' "\"$POOL\"") ||
  { kill -TERM "$PID"; fail "could not create the demo symposium"; }
DINNER=$(demo_activity demo-pool-symposium-dinner \
  '{"title":"Symposium + dinner (demo)","capacity":30,"pools":["'"$POOL"'"]}' "\"$POOL\"") ||
  { kill -TERM "$PID"; fail "could not create the demo symposium with dinner"; }

# A one-time sign-in link to the organisers' console, as an admin.
CONSOLE_LINK=$(CONSOLE_BASE_URL=${CONSOLE_BASE_URL:-$BASE} "$BIN" console-link --sub admin --admin --ttl 30m) ||
  { kill -TERM "$PID"; fail "could not make a console sign-in link"; }

cat <<MSG

capacityd is running on $BASE (Ctrl-C stops it)

  console:       $CONSOLE_LINK
                 (one-time sign-in link as admin, valid 30 minutes; another: $BIN console-link --sub NAME --admin)
  demo page:     $BASE/demo?activity=$DEMO&waitlist=$WAITLIST&pool=$POOL&note=demo-note
  metrics:       $METRICS_URL
  webhooks:      $WEBHOOKS

  admin token:   export ADMIN=$ADMIN
  user token:    export USER_TOKEN=$USER_TOKEN
  other tokens:  $TOKEN_CMD --sub bob [--admin] [--role R]...

  curl -s $BASE/v1/activities/$DEMO
  curl -s $BASE/v1/activities/$DEMO/seats
  curl -s -X POST $BASE/v1/activities/$DEMO/registrations -H "Authorization: Bearer \$USER_TOKEN" -d '{}'
  curl -s -X POST $BASE/v1/activities/$WAITLIST/registrations -H "Authorization: Bearer \$USER_TOKEN" -d '{"seats":3}'
  curl -s -X POST $BASE/v1/activities/$SYMPOSIUM/registrations -H "Authorization: Bearer \$USER_TOKEN" -d '{}'
  curl -s $BASE/v1/activities/$DINNER/seats
  curl -s $BASE/v1/pools/$POOL
  curl -s -X POST $BASE/v1/activities -H "Authorization: Bearer \$ADMIN" -d '{"title":"Journal club","capacity":120}'
  curl -s -X POST $BASE/v1/notes/demo-note/views
  curl -N $BASE/v1/activities/$DEMO/seats/stream

MSG
wait $PID
