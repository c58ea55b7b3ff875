#!/usr/bin/env bash
# Checks the release configuration (.goreleaser.yaml) the way the release
# workflow uses it: `goreleaser check`, then a snapshot build of both
# binaries for this machine's platform, whose agentos must run and report
# the snapshot's version stamp. Prints how long each part took.
# Usage: bash .ci/release-check.sh   (GORELEASER_VERSION overrides the pin)
set -euo pipefail
cd "$(dirname "$0")/.."
version=${GORELEASER_VERSION:-v2.15.1}
gr() { go run "github.com/goreleaser/goreleaser/v2@$version" "$@"; }
dist=$(mktemp -d)
trap 'rm -rf "$dist"' EXIT

t0=$(date +%s)
gr check
t1=$(date +%s)
echo "release-check: goreleaser check passed ($((t1 - t0))s, including go run's build of goreleaser $version)"

# --single-target: the host's GOOS/GOARCH only; --snapshot: no tag, no
# publishing. --output-less: dist goes to a temporary directory.
sed "s|^project_name: agentos$|project_name: agentos\ndist: $dist/dist|" .goreleaser.yaml >"$dist/goreleaser.yaml"
gr build --snapshot --single-target --clean --config "$dist/goreleaser.yaml"
t2=$(date +%s)
bin=$(find "$dist/dist" -type f -name agentos -perm -u+x | head -n1)
launch=$(find "$dist/dist" -type f -name agentos-launch -perm -u+x | head -n1)
[ -n "$bin" ] && [ -n "$launch" ] || { echo "release-check: the snapshot build made no agentos and agentos-launch"; exit 1; }
"$bin" version
file "$bin" 2>/dev/null | grep -q 'statically linked' || { command -v file >/dev/null 2>&1 && { echo "release-check: $bin is not statically linked"; exit 1; }; true; }
echo "release-check: snapshot build of agentos and agentos-launch for $(go env GOOS)/$(go env GOARCH) ($((t2 - t1))s)"
