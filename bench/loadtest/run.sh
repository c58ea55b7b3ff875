#!/usr/bin/env bash
# Webhook intake benchmark: the bot's intake as `agentos serve` runs it
# (bot/server + webhook.Handler + LogQueue, every delivery durable before
# 202), also with the Processor running, a bare go-github
# ValidatePayload+ParseWebHook server, and a
# minimal Probot app (probot@14.3.2, one issue_comment.created handler),
# measured by bench/loadgen in alternating order.
#
# Everything listens on 127.0.0.1 only. Probot is installed with npm into
# $PROBOT_DIR (default ~/.cache/agentos-probot), never into the repository.
#
#   bash bench/loadtest/run.sh [loadgen flags...]
#   e.g. bash bench/loadtest/run.sh -rounds 3 -sat-duration 8s -rate-duration 8s
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
PROBOT_DIR=${PROBOT_DIR:-$HOME/.cache/agentos-probot}
PROBOT_VERSION=14.3.2
BASE_PORT=${BASE_PORT:-18091}
work=$(mktemp -d -t agentos-webhook-loadtest-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Probot, outside the repository.
if [ "$(node -p "try{require('$PROBOT_DIR/node_modules/probot/package.json').version}catch(e){''}" 2>/dev/null)" != "$PROBOT_VERSION" ]; then
  mkdir -p "$PROBOT_DIR"
  [ -f "$PROBOT_DIR/package.json" ] || echo '{"private":true}' > "$PROBOT_DIR/package.json"
  npm install --prefix "$PROBOT_DIR" --no-audit --no-fund "probot@$PROBOT_VERSION" >&2
fi

secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
openssl genrsa -out "$work/app-key.pem" 2048 2>/dev/null

(cd "$repo" && go build -o "$work/benchserver" ./bench/benchserver)

# wait_listening FILE: wait for the "listening on" line a server prints.
wait_listening() {
  for _ in $(seq 1 200); do
    grep -q "listening on" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "server did not start:" >&2; cat "$1" >&2; return 1
}

start_go() { # name kind port extra...
  local name=$1 kind=$2 port=$3; shift 3
  "$work/benchserver" -kind "$kind" -addr "127.0.0.1:$port" -secret "$secret" "$@" >"$work/$name.out" 2>&1 &
  pids+=($!)
  wait_listening "$work/$name.out"
  targets+=(-target "$name=http://127.0.0.1:$port/webhook@$!")
}

targets=()
mkdir -p "$work/ours" "$work/ours-proc"
start_go ours ours "$BASE_PORT" -dir "$work/ours"
start_go ours+proc ours "$((BASE_PORT + 1))" -dir "$work/ours-proc" -process
start_go bare bare "$((BASE_PORT + 2))"

PROBOT_DIR="$PROBOT_DIR" APP_ID=1 PRIVATE_KEY_PATH="$work/app-key.pem" WEBHOOK_SECRET="$secret" \
  HOST=127.0.0.1 PORT=$((BASE_PORT + 3)) LOG_LEVEL=warn NODE_ENV=production \
  node "$repo/bench/loadtest/probot-app.mjs" >"$work/probot.out" 2>&1 &
pids+=($!)
wait_listening "$work/probot.out"
targets+=(-target "probot=http://127.0.0.1:$((BASE_PORT + 3))/api/github/webhooks@$!")

echo "node $(node --version), probot $PROBOT_VERSION, $(go version | cut -d' ' -f3), $(nproc) CPUs" >&2
(cd "$repo" && go run ./bench/loadgen -secret "$secret" "${targets[@]}" "$@")

# Stop the servers; each Go server reports what it stored and dispatched,
# to compare with the 2xx answers loadgen counted.
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
pids=()
for name in ours ours+proc; do echo "$name: $(grep benchserver: "$work/$name.out")"; done
