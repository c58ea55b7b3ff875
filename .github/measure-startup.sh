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
# Usage: bash .github/measure-startup.sh [cached|source|both]   (default both)
# Prints wall-clock and CPU seconds (user+sys) of each; on a loaded machine
# compare CPU seconds. Neither includes the time from agentos's start to its
# first model call, which both paths share.
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

if [ "$what" = cached ] || [ "$what" = both ]; then
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
  timed cached bash -c "AGENTOS_DIR='$dir' bash .github/install-agentos.sh install >/dev/null && '$dir/agentos' version"
  kill $srv 2>/dev/null || true
fi

if [ "$what" = source ] || [ "$what" = both ]; then
  export GOCACHE="$work/gocache"
  timed source bash .ci/build-static.sh "$work/src/agentos" dev
fi
