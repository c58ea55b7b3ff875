#!/usr/bin/env bash
# Installs the npm packages the tests use as corpora (GitHub's OpenAPI
# description and its webhook examples) and as real counterparts (the MCP
# reference servers and the MCP Inspector) into $AGENTOS_NPM_DIR (default
# ~/.cache/agentos-npm). Tests find them through that variable; under CI=true
# a missing corpus fails the test instead of skipping it.
set -euo pipefail
dir="${AGENTOS_NPM_DIR:-$HOME/.cache/agentos-npm}"
mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{"name":"agentos-test-corpora","private":true}' > package.json
npm install --no-audit --no-fund --loglevel=error \
  @octokit/openapi@23.0.2 \
  @octokit/webhooks-examples@7.6.1 \
  @modelcontextprotocol/server-everything@2026.8.31 \
  @modelcontextprotocol/server-filesystem@2026.8.31 \
  @modelcontextprotocol/inspector@2.12.0 \
  @modelcontextprotocol/server-memory@2026.8.31
echo "npm corpora in $dir"
