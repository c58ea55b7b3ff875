#!/usr/bin/env bash
# Points a released commit's actions at the release:
#
#   bash .github/release-action.sh TAG IMAGE [DIR]
#
# In DIR (default .): action.yml (the composite action) gets
# `AGENTOS_RELEASE: TAG` in place of `AGENTOS_RELEASE: ""` (both steps that
# carry it), so it downloads and verifies that release's binary instead of
# building from source; docker/action.yml (the container action) gets
# `image: docker://IMAGE` in place of `image: ../Dockerfile`. No other line
# changes. TAG is the release's version tag (v1.2.3, v1.2.3-rc.1); IMAGE is a
# lower-case reference with a tag, as ghcr.io requires, e.g.
# ghcr.io/owner/agentos:v1.2.3. The release workflow runs it on the commit it
# tags (see .github/workflows/release.yml); main keeps building from source.
# Running it again with the same arguments changes nothing, so a re-run
# release job is safe; any other starting point is an error.
set -euo pipefail

tag=${1:?usage: release-action.sh TAG IMAGE [DIR]}
image=${2:?usage: release-action.sh TAG IMAGE [DIR]}
dir=${3:-.}

if ! [[ $tag =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "release-action.sh: $tag is not a version tag (v1.2.3 or v1.2.3-rc.1)" >&2
  exit 2
fi
# registry/path:tag, lower case (GHCR rejects upper-case repository names),
# no digest, no whitespace or characters that would need YAML quoting.
if ! [[ $image =~ ^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)+:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]]; then
  echo "release-action.sh: $image is not a lower-case image reference with a tag (registry/owner/name:tag)" >&2
  exit 2
fi
composite="$dir/action.yml"
container="$dir/docker/action.yml"
for f in "$composite" "$container"; do
  if [ ! -f "$f" ]; then
    echo "release-action.sh: $f does not exist" >&2
    exit 2
  fi
done

# rewrite FILE FROM TO COUNT: replaces the COUNT lines equal to FROM with TO,
# or does nothing when the file already has COUNT lines equal to TO.
rewrite() {
  local file=$1 from=$2 to=$3 count=$4 n tmp line
  if [ "$(grep -cxF -- "$to" "$file" || true)" = "$count" ] && ! grep -qxF -- "$from" "$file"; then
    echo "release-action.sh: $file already released"
    return 0
  fi
  n=$(grep -cxF -- "$from" "$file" || true)
  if [ "$n" != "$count" ]; then
    echo "release-action.sh: $file has $n lines \"$from\", want exactly $count" >&2
    return 1
  fi
  tmp=$(mktemp "$file.XXXXXX")
  while IFS= read -r line || [ -n "$line" ]; do
    if [ "$line" = "$from" ]; then printf '%s\n' "$to"; else printf '%s\n' "$line"; fi
  done <"$file" >"$tmp"
  cat "$tmp" >"$file" # keeps the file's mode
  rm -f "$tmp"
  echo "release-action.sh: $file now says ${to#"${to%%[! ]*}"}"
}

# Check both before changing either, so a refusal leaves both untouched.
check() {
  local file=$1 from=$2 to=$3 count=$4
  if [ "$(grep -cxF -- "$to" "$file" || true)" = "$count" ] && ! grep -qxF -- "$from" "$file"; then return 0; fi
  if [ "$(grep -cxF -- "$from" "$file" || true)" != "$count" ]; then
    echo "release-action.sh: $file has $(grep -cxF -- "$from" "$file" || true) lines \"$from\", want exactly $count (already released as another version?)" >&2
    return 1
  fi
}
check "$composite" '        AGENTOS_RELEASE: ""' "        AGENTOS_RELEASE: $tag" 2
check "$container" '  image: ../Dockerfile' "  image: docker://$image" 1
rewrite "$composite" '        AGENTOS_RELEASE: ""' "        AGENTOS_RELEASE: $tag" 2
rewrite "$container" '  image: ../Dockerfile' "  image: docker://$image" 1
