# The release image, assembled by GoReleaser (.goreleaser.yaml, dockers_v2)
# from the binaries of the release's own build: no compile here. The image
# the repository's Dockerfile builds from source has the same contents.
FROM debian:bookworm-slim
ARG TARGETPLATFORM
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates bubblewrap \
 && rm -rf /var/lib/apt/lists/* \
 && git config --system --add safe.directory /github/workspace
COPY $TARGETPLATFORM/agentos $TARGETPLATFORM/agentos-launch /usr/local/bin/
# No USER: GitHub runs a container action as the image's user with the
# workspace owned by the runner's user, and asks such images to run as root.
ENTRYPOINT ["agentos", "action"]
