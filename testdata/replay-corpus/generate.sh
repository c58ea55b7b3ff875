#!/usr/bin/env bash
# Regenerates the replay corpus: the demo's session log as written by
# earlier agentos commits (releases), each built from this repository's
# history in a temporary worktree. The logs are committed; CI reads them
# with the current code (cmd/agentos TestReplayCorpus). Usage:
#   bash testdata/replay-corpus/generate.sh COMMIT...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
for c in "$@"; do
  full=$(git -C "$repo" rev-parse "$c")
  short=${full:0:12}
  date=$(git -C "$repo" show -s --format=%cs "$full")
  wt=$(mktemp -d)
  git -C "$repo" worktree add --detach -q "$wt" "$full"
  (cd "$wt" && go build -o "$wt/agentos-old" ./cmd/agentos)
  out=$(cd "$(mktemp -d)" && AGENTOS_DATA="$(mktemp -d)" "$wt/agentos-old" demo 2>&1)
  log=$(printf '%s\n' "$out" | sed -n 's/^Session log: \([^ ]*\) .*/\1/p' | tail -1)
  [ -n "$log" ] || { printf '%s\n' "$out" | tail -20; echo "no session log from $short" >&2; exit 1; }
  dest="$here/$date-$short"
  mkdir -p "$dest"
  cp "$log" "$dest/events.jsonl"
  printf '{"commit":"%s","date":"%s","command":"agentos demo"}\n' "$full" "$date" > "$dest/meta.json"
  git -C "$repo" worktree remove --force "$wt"
  echo "$dest: $(wc -l < "$dest/events.jsonl") events"
done
