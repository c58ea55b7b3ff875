#!/usr/bin/env bash
# Builds the real-project corpus (docs/real-projects.md) in
# $AGENTOS_CORPUS_DIR (default ~/.cache/agentos-corpus): published packages
# that ship their own tests, each made into a git repository of one commit.
#
#   go/go-multierror github.com/hashicorp/go-multierror, from the Go module cache
#   go/go-jmespath   github.com/jmespath/go-jmespath (test-only dependencies)
#   npm/shell-quote  the npm tarball, with a package-lock.json made here
#   npm/through      the npm tarball, no lock file (setup: npm install)
#   python/toolz     Debian's python3-toolz, which ships toolz/tests
#
# The dependencies are NOT in the corpus: the setup phase of each run
# fetches them. Debian's python3-pytest is installed on the host (the
# Python tests run with it; PyPI is not used). Idempotent: a project whose
# directory exists is kept; delete it to rebuild. cmd/agentos's
# TestRealProject* read the corpus, and fail under CI=true without it.
set -euo pipefail
dir="${AGENTOS_CORPUS_DIR:-$HOME/.cache/agentos-corpus}"
mkdir -p "$dir"
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# commit DIR: DIR becomes a git repository with its files in one commit.
commit() {
  git -C "$1" init -q -b main
  git -C "$1" add -A
  git -C "$1" -c user.name=agentos-corpus -c user.email=corpus@agentos.invalid -c commit.gpgsign=false commit -q -m "$2"
}

# done NAME: the project exists (a finished build is renamed into place).
done_() { [ -d "$dir/$1/.git" ]; }

# install DIR NAME: moves a built project into place.
install() {
  mkdir -p "$(dirname "$dir/$2")"
  rm -rf "$dir/$2"
  mv "$1" "$dir/$2"
  echo "corpus: $2"
}

gomod() { # NAME MODULE@VERSION
  done_ "go/$1" && return
  local src
  src=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$2" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$src" ] || { echo "go mod download $2 gave no directory" >&2; exit 1; }
  cp -r "$src" "$work/$1"
  chmod -R u+w "$work/$1"
  commit "$work/$1" "$2 from the Go module cache"
  install "$work/$1" "go/$1"
}

npmpkg() { # NAME PACKAGE@VERSION lock|nolock
  done_ "npm/$1" && return
  mkdir -p "$work/$1"
  local tgz
  tgz=$(cd "$work" && npm pack "$2" --silent --loglevel=error)
  tar -xzf "$work/$tgz" -C "$work/$1" --strip-components=1
  if [ "$3" = lock ]; then
    # The lock file pins what npm ci (the detected setup) installs.
    (cd "$work/$1" && npm install --package-lock-only --ignore-scripts --no-audit --no-fund --loglevel=error)
  else
    mkdir -p "$work/$1/.agent"
    printf 'setup:\n  - npm install --no-package-lock --ignore-scripts --no-audit --no-fund\n' >"$work/$1/.agent/config.yaml"
  fi
  printf 'node_modules/\n' >"$work/$1/.gitignore"
  commit "$work/$1" "$2 from the npm registry"
  install "$work/$1" "npm/$1"
}

debpy() { # NAME DEBIAN-PACKAGE=VERSION PYTHON-PACKAGES...
  done_ "python/$1" && return
  local name=$1 pkg=$2
  shift 2
  mkdir -p "$work/deb" "$work/$name/.agent"
  # apt checks the package against the archive's signed index.
  # An empty package list (a fresh machine) needs apt-get update first.
  (cd "$work/deb" && apt-get download -q "$pkg" >/dev/null 2>&1) || {
    if [ "$(id -u)" = 0 ]; then apt-get update -q >/dev/null; else sudo apt-get update -q >/dev/null; fi
    (cd "$work/deb" && apt-get download "$pkg")
  }
  dpkg-deb -x "$work"/deb/*.deb "$work/deb/root"
  for p in "$@"; do cp -r "$work/deb/root/usr/lib/python3/dist-packages/$p" "$work/$name/"; done
  # Debian's interpreter, which has Debian's pytest (a PATH may put
  # another python3 first); the tests need nothing to be installed.
  printf 'setup: []\ntest: /usr/bin/python3 -m pytest -q -p no:cacheprovider\n' >"$work/$name/.agent/config.yaml"
  printf '__pycache__/\n' >"$work/$name/.gitignore"
  commit "$work/$name" "$pkg from Debian"
  install "$work/$name" "python/$name"
}

gomod go-multierror github.com/hashicorp/go-multierror@v1.1.1
gomod go-jmespath github.com/jmespath/go-jmespath@v0.4.0
npmpkg shell-quote shell-quote@1.6.1 lock
npmpkg through through@2.3.8 nolock
debpy toolz python3-toolz=0.12.0-1 toolz tlz

if ! /usr/bin/python3 -c 'import pytest' 2>/dev/null; then
  if [ "$(id -u)" = 0 ]; then apt-get install -y -q python3-pytest || { apt-get update && apt-get install -y -q python3-pytest; }
  else sudo apt-get install -y -q python3-pytest || { sudo apt-get update && sudo apt-get install -y -q python3-pytest; }; fi
fi
echo "real-project corpus in $dir"
