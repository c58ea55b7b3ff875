#!/usr/bin/env bash
# Prints a PATH that has every command of the current PATH except bwrap:
# a directory of symbolic links, made once per run. With it, agentos's
# sandbox (mode auto) finds no bubblewrap and takes the Landlock path, as
# on a fresh machine without the package.
set -euo pipefail
dir="${TMPDIR:-/tmp}/agentos-ci-nobwrap-$$"
mkdir -p "$dir"
IFS=: read -ra dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  [ -d "$d" ] || continue
  for f in "$d"/*; do
    b=${f##*/}
    [ "$b" = bwrap ] && continue
    [ -x "$f" ] && [ ! -e "$dir/$b" ] && ln -s "$f" "$dir/$b"
  done
done
if PATH="$dir" command -v bwrap >/dev/null 2>&1; then
  echo "nobwrap-path: bwrap is still on the PATH" >&2; exit 1
fi
echo "$dir"
