#!/usr/bin/env bash
# Points a released action.yml at a prebuilt image:
#
#   bash .github/release-action.sh IMAGE [ACTION_YML]
#
# rewrites `runs.image: Dockerfile` to `image: docker://IMAGE` in ACTION_YML
# (default action.yml), in place, touching no other line. IMAGE is a
# lower-case reference with a tag, as ghcr.io requires, e.g.
# ghcr.io/owner/agentos:v1.2.3. The release workflow runs it on the commit it
# tags (see .github/workflows/release.yml); main keeps `image: Dockerfile`.
# Running it again with the same IMAGE changes nothing, so a re-run release
# job is safe; any other starting point is an error.
set -euo pipefail

image=${1:?usage: release-action.sh IMAGE [ACTION_YML]}
file=${2:-action.yml}

# registry/path:tag, lower case (GHCR rejects upper-case repository names),
# no digest, no whitespace or characters that would need YAML quoting.
if ! [[ $image =~ ^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)+:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]]; then
  echo "release-action.sh: $image is not a lower-case image reference with a tag (registry/owner/name:tag)" >&2
  exit 2
fi
if [ ! -f "$file" ]; then
  echo "release-action.sh: $file does not exist" >&2
  exit 2
fi

want="  image: docker://$image"
if grep -qxF "$want" "$file"; then
  echo "release-action.sh: $file already uses docker://$image"
  exit 0
fi
n=$(grep -cxF "  image: Dockerfile" "$file" || true)
if [ "$n" != 1 ]; then
  echo "release-action.sh: $file has $n lines \"  image: Dockerfile\" under runs:, want exactly 1" >&2
  exit 1
fi
tmp=$(mktemp "$file.XXXXXX")
trap 'rm -f "$tmp"' EXIT
while IFS= read -r line || [ -n "$line" ]; do
  if [ "$line" = "  image: Dockerfile" ]; then
    printf '%s\n' "$want"
  else
    printf '%s\n' "$line"
  fi
done <"$file" >"$tmp"
cat "$tmp" >"$file" # keeps the file's mode
echo "release-action.sh: $file now uses docker://$image"
