#!/usr/bin/env bash
# Installs the npm tools of make lint and make test (tools/npm/package.json,
# pinned by its package-lock.json): Redocly CLI, which lints
# api/openapi.yaml, and Prism, the validating proxy of the API description
# test (internal/test/apicheck). `npm ci` installs them into tools/npm/node_modules
# from the npm registry; nothing is installed again while the lockfile is
# unchanged. Without npm, Debian's nodejs and npm are installed (as root;
# otherwise it says how).
#
# Usage: scripts/npm-tools.sh
set -euo pipefail
cd "$(dirname "$0")/../tools/npm"

log() { echo "npm-tools: $*" >&2; }

stamp=node_modules/.lock-installed
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp" &&
  [ -x node_modules/.bin/redocly ] && [ -x node_modules/.bin/prism ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    log "npm is missing: as root, apt-get install nodejs npm"
    exit 1
  fi
  log "installing Debian's nodejs and npm"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
log "npm ci in tools/npm"
npm ci --no-audit --no-fund --loglevel=error >/dev/null
cp package-lock.json "$stamp"
