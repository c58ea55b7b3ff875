#!/usr/bin/env bash
# Fails when the stripped agentos binary, built as .ci/build-static.sh
# builds it (CGO_ENABLED=0, -trimpath, -tags nomsgpack,grpcnotrace, -s -w),
# is larger than the budget. Usage: size-check.sh [BUDGET_MB]   (default 60;
# or $AGENTOS_SIZE_BUDGET_MB). On failure it lists the biggest packages,
# from the symbols of an unstripped build, to show where the weight is, and
# the code that keeps the linker from dropping unused methods.
set -euo pipefail
cd "$(dirname "$0")/.."
budget_mb=${1:-${AGENTOS_SIZE_BUDGET_MB:-60}}
tags=nomsgpack,grpcnotrace
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bash .ci/build-static.sh "$dir/agentos"
size=$(stat -c %s "$dir/agentos")
budget=$((budget_mb * 1000 * 1000))
awk -v s="$size" -v b="$budget_mb" 'BEGIN { printf "agentos stripped: %d bytes (%.1f MB); budget %d MB\n", s, s / 1e6, b }'
if [ "$size" -le "$budget" ]; then
  exit 0
fi
echo "agentos is over its size budget. Biggest packages (bytes of code and read-only data symbols, unstripped build):"
CGO_ENABLED=0 go build -trimpath -tags "$tags" -o "$dir/agentos.full" ./cmd/agentos
# Code (T) and read-only data (R) only: they, and the line tables that
# grow with the code, are the file; the biggest data symbol is zeroed
# memory that takes no room in it.
go tool nm -size -sort size "$dir/agentos.full" >"$dir/nm"
awk '
  $3 ~ /^[TtRr]$/ { name = $4; for (i = 5; i <= NF; i++) name = name " " $i
    sub(/^(type:|go:)\*?/, "", name)
    slash = 0; if (match(name, /^[^ (]*\//)) slash = RLENGTH
    rest = substr(name, slash + 1); dot = index(rest, ".")
    pkg = dot ? substr(name, 1, slash + dot - 1) : name
    sizes[pkg] += $2 }
  END { for (k in sizes) printf "%10d  %s\n", sizes[k], k }' "$dir/nm" | sort -rn >"$dir/pkgs"
head -25 "$dir/pkgs"
# A reachable call of reflect's Method or MethodByName with a name not
# known at compile time (text/template's field lookup is one) makes the
# linker keep every exported method of every type that can sit in an
# interface, whether called or not: worth ~17 MB here. The linker's
# dependency dump says which functions do it and how they are reached.
CGO_ENABLED=0 go build -trimpath -tags "$tags" -ldflags=-dumpdep -o "$dir/agentos.dep" ./cmd/agentos >"$dir/dumpdep" 2>&1 || true
awk '
  / -> / {
    split($0, ft, / -> /); from = ft[1]; to = ft[2]
    flag = (to ~ /<ReflectMethod>/)
    sub(/ <.*$/, "", from); sub(/ <.*$/, "", to)
    if (!(to in parent)) parent[to] = from
    if (flag && to !~ /^reflect\./) seen[to] = 1
  }
  END {
    n = 0
    for (f in seen) {
      if (n++ == 0) print "Unused methods are kept (method dead-code elimination is off); reflect method lookups reached, each by the first path the linker found (once one is reached, later paths can be its consequence):"
      line = f; s = f
      for (i = 0; i < 40 && (s in parent) && parent[s] != "_"; i++) {
        s = parent[s]
        if (s ~ /^(type:|go:|gclocals)/ || s ~ /·f$/ || s ~ /\.\.inittask$/) continue
        line = line " <- " s
        if (s ~ /^main\./ || (s ~ /\.init(\.[0-9]+)?$/ && s !~ /\.map\.init/)) break
      }
      print "  " line
    }
    if (n == 0) print "Method dead-code elimination is on (no reflect method lookup reached)."
  }' "$dir/dumpdep"
exit 1
