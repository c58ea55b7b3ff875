#!/usr/bin/env bash
# Builds the static agentos binary the way the Dockerfile does, so CI catches
# a build the image would fail. Usage: build-static.sh OUT [VERSION]
set -euo pipefail
out=${1:?usage: build-static.sh OUT [VERSION]}
version=${2:-dev}
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${version}" -o "$out" ./cmd/agentos
