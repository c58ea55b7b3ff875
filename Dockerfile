# syntax=docker/dockerfile:1
# agentos as a server image, and the container form of the GitHub Action
# (docker/action.yml builds it on main; a release uses the image GoReleaser
# assembles from the release's binaries, .github/release.Dockerfile). The
# default Action (action.yml) is composite and runs a released binary on the
# runner instead: docs/action-setup.md says which to choose.
# Build:  docker build -t agentos .
# The binaries are built exactly as .ci/build-static.sh builds them in CI:
# agentos, and agentos-launch, the sandbox's small launcher, which agentos
# takes from its own directory (without it, agentos re-executes itself for
# every command, at tens of milliseconds each).

# The build stage runs on the builder's own platform and cross-compiles
# (pure Go, CGO_ENABLED=0), so the release's arm64 image is not compiled
# under emulation.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS TARGETARCH
RUN export GOOS="${TARGETOS:-$(go env GOOS)}" GOARCH="${TARGETARCH:-$(go env GOARCH)}" \
 && bash .ci/build-static.sh /out/agentos "${VERSION}"

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates bubblewrap \
 && rm -rf /var/lib/apt/lists/* \
 && git config --system --add safe.directory /github/workspace
COPY --from=build /out/agentos /out/agentos-launch /usr/local/bin/
# No USER: GitHub runs a Docker container action as the image's user with
# GITHUB_WORKSPACE mounted at /github/workspace and owned by the runner's
# user, and asks such images to run as root (see GitHub's "Dockerfile
# support for GitHub Actions"); git is told that the mounted checkout,
# owned by another uid, is safe.
ENTRYPOINT ["agentos", "action"]
