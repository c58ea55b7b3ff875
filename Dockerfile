# syntax=docker/dockerfile:1
# agentos as a GitHub Action (Docker container action) and a server image.
# Build:  docker build -t agentos .
# The binary is built exactly as .ci/build-static.sh builds it in CI.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN bash .ci/build-static.sh /out/agentos "${VERSION}"

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates bubblewrap \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 agentos
COPY --from=build /out/agentos /usr/local/bin/agentos
USER agentos
ENTRYPOINT ["agentos", "action"]
