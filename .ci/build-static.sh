#!/usr/bin/env bash
# Builds the static agentos binary, and next to it agentos-launch (the
# sandbox's small launcher, which agentos looks for in its own directory),
# the way the Dockerfile does, so CI catches a build the image would fail.
# Usage: build-static.sh OUT [VERSION]  (the launcher: $(dirname OUT)/agentos-launch)
set -euo pipefail
out=${1:?usage: build-static.sh OUT [VERSION]}
version=${2:-dev}
# nomsgpack: gin without its MessagePack binding and renderer (ugorji's
# codec), which agentos never uses: 6.3 MB less (88.9 → 82.6 MB stripped).
# grpcnotrace: gRPC (linked through the Gemini SDK's Google auth and the OTLP
# exporter, never served) without golang.org/x/net/trace, whose init
# registers /debug/requests and /debug/events pages rendered with
# html/template: a reachable template execution keeps every exported method
# of every type in the binary (docs/measurements.md, binary size).
tags=nomsgpack,grpcnotrace
CGO_ENABLED=0 go build -trimpath -tags "$tags" -ldflags "-s -w -X github.com/agentos/agentos/runtime/buildinfo.stamped=${version}" -o "$out" ./cmd/agentos
# Static (CGO_ENABLED=0) matters here too: a dynamically linked launcher
# pays the dynamic loader on every command.
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$(dirname "$out")/agentos-launch" ./cmd/agentos-launch
