#!/usr/bin/env bash
# Installs the agentos binaries for the composite action (action.yml), on the
# runner itself:
#
#   install-agentos.sh locate    # outputs dir= and key= for actions/cache
#   install-agentos.sh install   # outputs bin= (the agentos executable)
#
# A release (AGENTOS_RELEASE=v1.2.3, set on a release commit by
# .github/release-action.sh): the archive for the runner's OS and
# architecture and the release's checksums.txt are downloaded from
# AGENTOS_ACTION_REPOSITORY's release, and the archive's SHA-256 must match
# its line in checksums.txt before anything is extracted. A cached archive
# is verified the same way on every run (checksums.txt is fetched again),
# and the binaries are extracted from it afresh, so a cache entry never
# supplies an unverified binary. A checksum mismatch or an archive missing
# from checksums.txt fails the step; it never falls back to a build.
#
# No release (main, a branch or a commit of the action; or the release has
# no asset for this platform): agentos is built from the action's own
# source with the runner's Go (.ci/build-static.sh, the release's flags),
# cached under a hash of that source.
#
# Environment: RUNNER_OS, RUNNER_ARCH, RUNNER_TOOL_CACHE (or RUNNER_TEMP),
# GITHUB_ACTION_PATH, GITHUB_SERVER_URL, GITHUB_OUTPUT; AGENTOS_RELEASE,
# AGENTOS_ACTION_REPOSITORY; AGENTOS_DIR (install: the directory locate
# chose). AGENTOS_DOWNLOAD_URL overrides the release download root (tests).
set -euo pipefail

die() { echo "::error::agentos install: $*" >&2; exit 1; }
out() { if [ -n "${GITHUB_OUTPUT:-}" ]; then echo "$1" >>"$GITHUB_OUTPUT"; else echo "$1"; fi; }

mode=${1:-}
case "${RUNNER_OS:-$(uname -s)}" in
  Linux) os=linux ;;
  macOS | Darwin) os=darwin ;;
  *) die "runner OS ${RUNNER_OS:-?} is not supported (Linux and macOS are)" ;;
esac
case "${RUNNER_ARCH:-$(uname -m)}" in
  X64 | x86_64 | amd64) arch=amd64 ;;
  ARM64 | aarch64 | arm64) arch=arm64 ;;
  *) die "runner architecture ${RUNNER_ARCH:-?} is not supported (X64 and ARM64 are)" ;;
esac
src=${GITHUB_ACTION_PATH:-$(cd "$(dirname "$0")/.." && pwd)}
release=${AGENTOS_RELEASE:-}
if [ -n "$release" ] && ! [[ $release =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  die "AGENTOS_RELEASE $release is not a version tag (v1.2.3)"
fi
root=${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:-/tmp}}/agentos

sha256() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1" | cut -d' ' -f1
  else shasum -a 256 "$1" | cut -d' ' -f1; fi
}

# sourcehash names the action's source: every file but .git, by path and
# content, so a changed file (Go code or an embedded schema) is a new key.
sourcehash() {
  (cd "$src" && find . -path ./.git -prune -o -type f -print | LC_ALL=C sort | while IFS= read -r f; do
    printf '%s %s\n' "$(sha256 "$f")" "$f"
  done) | { if command -v sha256sum >/dev/null 2>&1; then sha256sum; else shasum -a 256; fi; } | cut -c1-20
}

case "$mode" in
  locate)
    if [ -n "$release" ]; then
      dir="$root/$release/$os-$arch"
      key="agentos-$release-$os-$arch"
    else
      h=$(sourcehash)
      dir="$root/src-$h/$os-$arch"
      key="agentos-src-$h-$os-$arch"
    fi
    out "dir=$dir"
    out "key=$key"
    ;;
  install)
    dir=${AGENTOS_DIR:?AGENTOS_DIR is not set: run locate first}
    mkdir -p "$dir"
    chmod 755 "$dir"
    built=""
    if [ -n "$release" ]; then
      server=${GITHUB_SERVER_URL:-https://github.com}
      repo=${AGENTOS_ACTION_REPOSITORY:?AGENTOS_ACTION_REPOSITORY is not set}
      base=${AGENTOS_DOWNLOAD_URL:-$server/$repo/releases/download}/$release
      archive="agentos_${release#v}_${os}_${arch}.tar.gz"
      sums=$(mktemp)
      trap 'rm -f "$sums"' EXIT
      if curl -fsSL --retry 3 --retry-delay 2 -o "$sums" "$base/checksums.txt"; then
        want=$(awk -v f="$archive" '$2 == f || $2 == "*" f { print $1 }' "$sums")
        [ -n "$want" ] || die "$archive is not listed in $release's checksums.txt"
        if [ ! -f "$dir/$archive" ] || [ "$(sha256 "$dir/$archive")" != "$want" ]; then
          rm -f "$dir/$archive"
          curl -fsSL --retry 3 --retry-delay 2 -o "$dir/$archive.part" "$base/$archive" || die "downloading $base/$archive failed"
          mv "$dir/$archive.part" "$dir/$archive"
        fi
        got=$(sha256 "$dir/$archive")
        if [ "$got" != "$want" ]; then
          rm -f "$dir/$archive"
          die "$archive: SHA-256 $got does not match checksums.txt ($want); refusing to run it"
        fi
        rm -f "$dir/agentos" "$dir/agentos-launch"
        tar -xzf "$dir/$archive" -C "$dir" agentos agentos-launch
        echo "agentos: $release for $os/$arch, SHA-256 verified ($want)"
        built=release
      else
        echo "::warning::agentos: no $release release found at $base (checksums.txt); building from the action's source"
      fi
    fi
    if [ -z "$built" ]; then
      if [ -x "$dir/agentos" ] && [ -x "$dir/agentos-launch" ] && [ -f "$dir/.built-from-source" ]; then
        echo "agentos: built from source earlier (cache hit: $(cat "$dir/.built-from-source"))"
      else
        command -v go >/dev/null 2>&1 || die "no release matches this action's version and Go is not installed to build it: add actions/setup-go before this step, or use a released version (uses: <owner>/agentos@v1)"
        start=$(date +%s)
        (cd "$src" && bash .ci/build-static.sh "$dir/agentos" "${release:-source}")
        echo "$(go env GOVERSION) $(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$dir/.built-from-source"
        echo "agentos: built from source in $(($(date +%s) - start))s"
      fi
    fi
    chmod 755 "$dir/agentos" "$dir/agentos-launch"
    "$dir/agentos" version >/dev/null 2>&1 || die "$dir/agentos does not run on this runner"
    out "bin=$dir/agentos"
    ;;
  *)
    die "usage: install-agentos.sh locate|install"
    ;;
esac
