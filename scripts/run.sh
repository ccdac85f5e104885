#!/usr/bin/env bash
# Runs capacityd for local use on :8080 (make run): migrates, creates a demo
# activity, prints the demo URL, tokens and curl examples, then serves with a
# development secret until interrupted. Expects the variables of .data/env.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=bin/capacityd
ADDR=${LISTEN_ADDR:-:8080}
PORT=${ADDR##*:}
BASE="http://127.0.0.1:$PORT"

"$BIN" migrate >/dev/null
ADMIN=$("$BIN" token --dev --sub admin --admin --ttl 24h)
USER_TOKEN=$("$BIN" token --dev --sub alice --ttl 24h)

"$BIN" serve --dev --demo-signups on --listen-addr "$ADDR" &
PID=$!
trap 'kill -TERM $PID 2>/dev/null; wait $PID' INT TERM
for _ in $(seq 100); do curl -fs "$BASE/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

DEMO=$(curl -fs -X POST "$BASE/v1/activities" -H "Authorization: Bearer $ADMIN" \
  -d '{"title":"Cardiology grand rounds (demo)","capacity":20}' | sed -E 's/.*"id":"([^"]+)".*/\1/')

cat <<MSG

capacityd is running on $BASE (Ctrl-C stops it)

  demo page:     $BASE/demo?activity=$DEMO&note=demo-note
  metrics:       $BASE/metrics

  admin token:   export ADMIN=$ADMIN
  user token:    export USER_TOKEN=$USER_TOKEN

  curl -s $BASE/v1/activities/$DEMO
  curl -s $BASE/v1/activities/$DEMO/seats
  curl -s -X POST $BASE/v1/activities/$DEMO/registrations -H "Authorization: Bearer \$USER_TOKEN" -d '{}'
  curl -s -X POST $BASE/v1/activities -H "Authorization: Bearer \$ADMIN" -d '{"title":"Journal club","capacity":120}'
  curl -s -X POST $BASE/v1/notes/demo-note/views
  curl -N $BASE/v1/activities/$DEMO/seats/stream

MSG
wait $PID
