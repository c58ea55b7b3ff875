#!/usr/bin/env bash
# Runs every fuzz target for FUZZ_TIME each (default 10s) and prints, per
# target, the executions, the corpus the coverage guidance grew, and the
# statement coverage of the target's package reached by that corpus.
# A crash fails the run; Go writes the input to the package's
# testdata/fuzz/<Target>/, which becomes a regression test once committed.
#   bash .ci/fuzz.sh               all targets, 10s each
#   FUZZ_TIME=5m bash .ci/fuzz.sh FuzzVerify   one target, longer
set -euo pipefail
cd "$(dirname "$0")/.."
time="${FUZZ_TIME:-10s}"
only="${1:-}"
cache="$(go env GOCACHE)/fuzz"
status=0
trap 'echo "fuzz.sh: stopped at line $LINENO (exit $?)" >&2' ERR
report=()
while read -r pkg target; do
  [ -z "$pkg" ] && continue
  if [ -n "$only" ] && [ "$only" != "$target" ]; then continue; fi
  log=$(mktemp)
  note=""
  for try in 1 2; do
    if go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$time" -fuzzminimizetime "${FUZZ_MINIMIZE_TIME:-2s}" >"$log" 2>&1; then
      break
    fi
    # Go's fuzz coordinator (go1.26, go.dev/issue/75804) can report a bare
    # "context deadline exceeded" when -fuzztime ends while a worker is
    # busy, most often on a loaded machine: no input failed and none is
    # written. A crash always writes its input. Such a run is tried once
    # more; a second one is reported, not failed.
    if grep -q 'Failing input written to' "$log" || ! grep -q '^    context deadline exceeded$' "$log"; then
      echo "--- $target ($pkg) FAILED:"; cat "$log"; status=1; break
    fi
    if [ "$try" = 1 ]; then
      echo "--- $target ($pkg): the fuzz coordinator's deadline race (go.dev/issue/75804), no failing input; running it again"
      note=" (retried)"
    else
      echo "--- $target ($pkg): the coordinator's deadline race again; no failing input was found, not counted as a failure"
      note=" (race twice)"
    fi
  done
  # A target whose seed corpus takes most of FUZZ_TIME to run (the
  # baseline) prints no "execs:" line; under set -o pipefail a grep that
  # finds nothing would end the script without a word.
  execs=$({ grep -o 'execs: [0-9]*' "$log" || true; } | tail -1 | awk '{print $2}')
  corpus=$({ grep -o 'total: [0-9]*' "$log" || grep -o 'coverage: [0-9]*/[0-9]* completed' "$log" || true; } | tail -1 | awk '{print $2}')
  # Coverage of the package by the corpus found: copy it beside the seeds
  # for one plain run, then take the copies away again.
  dir="$(go list -f '{{.Dir}}' "$pkg")/testdata/fuzz/$target"
  src="$cache/$(go list -f '{{.ImportPath}}' "$pkg")/$target"
  copied=()
  if [ -d "$src" ]; then
    mkdir -p "$dir"
    for f in "$src"/*; do
      b=$(basename "$f")
      if [ ! -e "$dir/$b" ]; then cp "$f" "$dir/$b"; copied+=("$dir/$b"); fi
    done
  fi
  cover=$(go test "$pkg" -run "^${target}\$" -cover 2>/dev/null | grep -o 'coverage: [0-9.]*%' | awk '{print $2}' || true)
  for f in "${copied[@]}"; do rm -f "$f"; done
  rmdir "$dir" "$(dirname "$dir")" "$(dirname "$(dirname "$dir")")" 2>/dev/null || true
  report+=("$(printf '%-22s %-34s %12s %8s %8s%s' "$target" "${pkg#./}" "${execs:-0}" "${corpus:-0}" "${cover:--}" "$note")")
  rm -f "$log"
done <<'TARGETS'
./bot/webhook FuzzDelivery
./bot/webhook FuzzRouteAction
./bot/command FuzzParse
./bot/api FuzzEventsResume
./kernel/patch FuzzParseApply
./kernel/patch FuzzApplyRoundTrip
./kernel/policy FuzzParse
./kernel/guard FuzzGuard
./kernel/toolrule FuzzCommandRules
./kernel/argv FuzzSplitAgreesWithSh
./runtime/skills FuzzSkillFile
./runtime/workflow FuzzWorkflowFile
./runtime/untrusted FuzzGitHubText
./bot/tracking FuzzNeutralize
./bot/tracking FuzzModelTextIsInert
./runtime/replay FuzzVerify
./runtime/event FuzzParseLineFast
./runtime/event FuzzValidValue
./runtime/event FuzzAppendCanonicalString
./runtime/store/sqlite FuzzBatchIndex
./schemas FuzzFastAgrees
./runtime/replay FuzzBudgetOf
TARGETS
printf '%-22s %-34s %12s %8s %8s\n' target package execs corpus coverage
printf '%s\n' "${report[@]}"
exit $status
