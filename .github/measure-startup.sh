#!/usr/bin/env bash
# Times how a job gets a runnable agentos, the two ways the Action can:
#
#   cached  the composite action with its binary in the actions/cache entry:
#           install-agentos.sh verifies the cached release archive against
#           checksums.txt (served locally here), extracts it, and agentos
#           starts (agentos version).
#   source  the container action on main (`image: ../Dockerfile`): every job
#           compiles agentos and agentos-launch from source in the image's
#           build stage. Docker is not needed: the compile is timed with the
#           same command (.ci/build-static.sh) and an empty Go build cache, as
#           in a fresh `docker build`; the image's apt-get and base-image pulls
#           are not counted, so the real figure is higher.
#
#   first-call  a job of the composite action from its start to its first
#           model call, with the binary cached: locate and install
#           (install-agentos.sh against a local release server, the archive
#           already in the cache directory, verified again), then
#           `agentos action` on an `/agent` comment, against the strict fake
#           GitHub and git server of bot/action's TestStartupWorld, with the
#           scripted provider (runtime/demo's fix-auth script). The first
#           model call is the session's first llm.request event, read from
#           the log the job commits to the artifact branch; each job starts a
#           new session (its own GITHUB_RUN_ID) in a fresh RUNNER_TEMP.
#           Needs GitHub's OpenAPI description (bash .ci/npm-deps.sh).
#           RUNS (default 5) jobs after one warm-up; prints each job's time to
#           the first model call and to its end, and their medians.
#
# Usage: bash .github/measure-startup.sh [cached|source|both|first-call]   (default both)
# Prints wall-clock and CPU seconds (user+sys) of each; on a loaded machine
# compare CPU seconds. cached and source do not include the time from
# agentos's start to its first model call, which both paths share;
# first-call does.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-both}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

timed() { # label command...
  local label=$1; shift
  local t
  /usr/bin/time -o "$work/$label.time" -f "%e %U %S" "$@" >"$work/$label.log" 2>&1 || { cat "$work/$label.log"; return 1; }
  read -r wall user sys <"$work/$label.time"
  printf '%-8s wall %7.2fs  cpu %7.2fs\n' "$label" "$wall" "$(echo "$user + $sys" | bc)"
}

release_server() { # builds a release archive of this tree and serves it on :18765
  # A release archive as GoReleaser makes it, from a build of this tree.
  mkdir -p "$work/stage" "$work/rel/v0.0.0" "$work/cache"
  bash .ci/build-static.sh "$work/stage/agentos" v0.0.0 >/dev/null
  os=$(go env GOOS) arch=$(go env GOARCH)
  archive="agentos_0.0.0_${os}_${arch}.tar.gz"
  tar -czf "$work/rel/v0.0.0/$archive" -C "$work/stage" agentos agentos-launch
  (cd "$work/rel/v0.0.0" && sha256sum "$archive" >checksums.txt)
  python3 -m http.server --bind 127.0.0.1 --directory "$work/rel" 18765 >/dev/null 2>&1 &
  srv=$!
  trap 'kill $srv 2>/dev/null; rm -rf "$work"' EXIT
  for _ in $(seq 1 60); do curl -fs http://127.0.0.1:18765/v0.0.0/checksums.txt >/dev/null && break; sleep 0.5; done
  runner_os=$([ "$os" = darwin ] && echo macOS || echo Linux)
  runner_arch=$([ "$arch" = arm64 ] && echo ARM64 || echo X64)
  export RUNNER_OS=$runner_os RUNNER_ARCH=$runner_arch RUNNER_TOOL_CACHE="$work/cache" AGENTOS_RELEASE=v0.0.0 \
    AGENTOS_ACTION_REPOSITORY=local/agentos AGENTOS_DOWNLOAD_URL=http://127.0.0.1:18765 GITHUB_ACTION_PATH="$PWD"
  dir=$(bash .github/install-agentos.sh locate | sed -n 's/^dir=//p')
  # First job: download. Then the measured one: the cache entry is there.
  AGENTOS_DIR="$dir" bash .github/install-agentos.sh install >/dev/null
}

if [ "$what" = cached ] || [ "$what" = both ]; then
  release_server
  timed cached bash -c "AGENTOS_DIR='$dir' bash .github/install-agentos.sh install >/dev/null && '$dir/agentos' version"
  kill $srv 2>/dev/null || true
fi

if [ "$what" = first-call ]; then
  release_server
  # The world: the strict fake GitHub and git server, served by a test binary.
  mkdir -p "$work/world"
  go test -c -o "$work/world.test" ./bot/action
  (cd bot/action && AGENTOS_STARTUP_WORLD="$work/world" exec "$work/world.test" -test.run '^TestStartupWorld$' -test.v -test.timeout 40m) >"$work/world.log" 2>&1 &
  world=$!
  trap 'touch "$work/world/stop"; wait $world 2>/dev/null; kill $srv 2>/dev/null; rm -rf "$work"' EXIT
  for _ in $(seq 1 600); do
    [ -f "$work/world/world.env" ] && break
    kill -0 $world 2>/dev/null || { cat "$work/world.log"; echo "the world did not start (GitHub's OpenAPI description: bash .ci/npm-deps.sh)" >&2; exit 1; }
    sleep 0.1
  done
  # shellcheck disable=SC1091
  . "$work/world/world.env"
  script="$PWD/runtime/demo/testdata/fix-auth.script.yaml"
  job() { # n: one job; prints "first-call-seconds job-seconds"
    local n=$1 tmp="$work/job$1"
    mkdir -p "$tmp"
    local start end sid ts
    start=$(date +%s.%N)
    (
      export RUNNER_TEMP="$tmp" GITHUB_OUTPUT="$tmp/output" GITHUB_STEP_SUMMARY="$tmp/summary.md" GITHUB_RUN_ID="$((1000 + n))" \
        GITHUB_RUN_ATTEMPT=1 GITHUB_ACTOR=alice GITHUB_WORKSPACE="$tmp" INPUT_PROVIDER=scripted AGENTOS_SCRIPT="$script"
      # The composite's steps, each with its own step outputs.
      GITHUB_OUTPUT="$tmp/locate.out" bash .github/install-agentos.sh locate
      GITHUB_OUTPUT="$tmp/install.out" AGENTOS_DIR="$(sed -n 's/^dir=//p' "$tmp/locate.out")" bash .github/install-agentos.sh install >/dev/null
      "$(sed -n 's/^bin=//p' "$tmp/install.out")" action >"$tmp/action.log" 2>&1 || { cat "$tmp/action.log" >&2; exit 1; }
    )
    end=$(date +%s.%N)
    sid=$(sed -n 's/^session_id=//p' "$tmp/output")
    ts=$(git --git-dir="$AGENTOS_STARTUP_BARE" show "agent-sessions:sessions/$sid/events.jsonl" | awk '/"type":"llm.request"/ && !f { f = 1; print }' | sed 's/.*"ts":"\([^"]*\)".*/\1/')
    [ -n "$ts" ] || { echo "job $n: no llm.request in session $sid's log" >&2; exit 1; }
    echo "$(echo "$(date -d "$ts" +%s.%N) - $start" | bc) $(echo "$end - $start" | bc)"
  }
  median() { sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
  job 0 >/dev/null # warm-up: the page cache, the first sandbox probe
  runs=${RUNS:-5}
  : >"$work/times"
  for n in $(seq 1 "$runs"); do
    job "$n" | tee -a "$work/times" | awk -v n="$n" '{printf "job %d: first model call %6.2fs, job %6.2fs\n", n, $1, $2}'
  done
  printf 'first-call median of %d: first model call %.2fs, job %.2fs\n' "$runs" "$(cut -d' ' -f1 "$work/times" | median)" "$(cut -d' ' -f2 "$work/times" | median)"
fi

if [ "$what" = source ] || [ "$what" = both ]; then
  export GOCACHE="$work/gocache"
  timed source bash .ci/build-static.sh "$work/src/agentos" dev
fi
