#!/usr/bin/env bash
# Fails when the stripped agentos binary, built as .ci/build-static.sh
# builds it (CGO_ENABLED=0, -trimpath, -tags nomsgpack, -s -w), is larger
# than the budget. Usage: size-check.sh [BUDGET_MB]   (default 60; or
# $AGENTOS_SIZE_BUDGET_MB). On failure it lists the biggest packages,
# from the symbols of an unstripped build, to show where the weight is.
set -euo pipefail
cd "$(dirname "$0")/.."
budget_mb=${1:-${AGENTOS_SIZE_BUDGET_MB:-60}}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bash .ci/build-static.sh "$dir/agentos"
size=$(stat -c %s "$dir/agentos")
budget=$((budget_mb * 1000 * 1000))
awk -v s="$size" -v b="$budget_mb" 'BEGIN { printf "agentos stripped: %d bytes (%.1f MB); budget %d MB\n", s, s / 1e6, b }'
if [ "$size" -le "$budget" ]; then
  exit 0
fi
echo "agentos is over its size budget. Biggest packages (symbol bytes, unstripped build):"
CGO_ENABLED=0 go build -trimpath -tags nomsgpack -o "$dir/agentos.full" ./cmd/agentos
go tool nm -size -sort size "$dir/agentos.full" | awk '
  { name = $4; for (i = 5; i <= NF; i++) name = name " " $i
    sub(/^(type:|go:)\*?/, "", name)
    slash = 0; if (match(name, /^[^ (]*\//)) slash = RLENGTH
    rest = substr(name, slash + 1); dot = index(rest, ".")
    pkg = dot ? substr(name, 1, slash + dot - 1) : name
    sizes[pkg] += $2 }
  END { for (k in sizes) printf "%10d  %s\n", sizes[k], k }' | sort -rn | head -25
exit 1
