#!/usr/bin/env bash
# Installs the real parts the tests start themselves and that pip cannot bring:
# Debian packages (redis-server for the shared event log, chromium for the
# inspector page) and the test-only npm packages in tests/js (the real
# @ag-ui/client). Each is installed only when missing, so a second run costs
# nothing. Python packages come from `pip install -e '.[test]'`.
set -euo pipefail
cd "$(dirname "$0")"

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v ss >/dev/null 2>&1 || need_apt+=(iproute2)  # reads a listener's backlog back
# spec/deploy.md's nginx configuration runs in front of a gateway (tests/test_deploy_guide.py)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need_apt+=(nginx)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  echo "+ apt-get install ${need_apt[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# PostgreSQL for the durable thread store (tests/postgres_server.py runs its own server, as
# the postgres user when root, on a free port in a temp directory; nothing is configured)
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  echo "+ apt-get install postgresql"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi

if [ ! -d js/node_modules/@ag-ui/client ] || [ js/package.json -nt js/node_modules/.package-lock.json ]; then
  echo "+ npm install (tests/js)"
  (cd js && npm install --no-audit --no-fund --loglevel=error)
fi

# the 0.0.59 line of @ag-ui/client / @ag-ui/core (what CopilotKit 1.74 and assistant-ui's react-ag-ui
# pin): the gateway's 0.x wire is checked against its real schemas and HttpAgent (spec/wire-versions.md)
if [ ! -d js/v0/node_modules/@ag-ui/client ] || [ js/v0/package-lock.json -nt js/v0/node_modules/.package-lock.json ]; then
  echo "+ npm ci (tests/js/v0)"
  (cd js/v0 && npm ci --no-audit --no-fund --loglevel=error)
fi

# CopilotKit's own runtime client (@copilotkit/core 1.74, what @copilotkit/react-core runs in the page),
# pointed at the gateway's CopilotKit runtime routes (spec/runtime-routes.md)
if [ ! -d js/copilotkit/node_modules/@copilotkit/core ] || [ js/copilotkit/package-lock.json -nt js/copilotkit/node_modules/.package-lock.json ]; then
  echo "+ npm ci (tests/js/copilotkit)"
  (cd js/copilotkit && npm ci --no-audit --no-fund --loglevel=error)
fi

# a React page with CopilotKit's v2 chat (@copilotkit/react-core 1.74, react, react-dom, esbuild):
# bundled once per test session and driven in Chromium against the gateway (test_copilotkit_page.py)
if [ ! -d js/copilotkit-page/node_modules/@copilotkit/react-core ] || [ js/copilotkit-page/package-lock.json -nt js/copilotkit-page/node_modules/.package-lock.json ]; then
  echo "+ npm ci (tests/js/copilotkit-page)"
  (cd js/copilotkit-page && npm ci --no-audit --no-fund --loglevel=error)
fi

# CopilotKit's Node runtime (@copilotkit/runtime 1.75 CopilotRuntime under Express, benchmarks/gateways/node's
# lock file, shared with the gateway benchmark): the CopilotKit page is driven through it as well as straight at
# the gateway (test_copilotkit_page.py, mode "runtime")
if [ ! -d ../benchmarks/gateways/node/node_modules/@copilotkit/runtime ] || [ ../benchmarks/gateways/node/package-lock.json -nt ../benchmarks/gateways/node/node_modules/.package-lock.json ]; then
  echo "+ npm ci (benchmarks/gateways/node)"
  (cd ../benchmarks/gateways/node && npm ci --no-audit --no-fund --loglevel=error)
fi

# a React page with assistant-ui's AG-UI runtime (@assistant-ui/react-ag-ui 0.0.58, @assistant-ui/react
# 0.15, @ag-ui/client 0.0.59; an `overrides` entry pins @assistant-ui/react-generative-ui 0.0.16, as
# 0.0.17 is not on the registry): bundled once per session, driven in Chromium (test_assistant_ui_page.py)
if [ ! -d js/assistant-ui-page/node_modules/@assistant-ui/react-ag-ui ] || [ js/assistant-ui-page/package-lock.json -nt js/assistant-ui-page/node_modules/.package-lock.json ]; then
  echo "+ npm ci (tests/js/assistant-ui-page)"
  (cd js/assistant-ui-page && npm ci --no-audit --no-fund --loglevel=error)
fi

# the build-time packages of the vendored A2UI renderer (@a2ui/lit, esbuild): a test rebuilds the
# committed bundle from their lock file and compares
if [ ! -d ../scripts/a2ui_lit/node_modules/esbuild ]; then
  echo "+ npm ci (scripts/a2ui_lit)"
  (cd ../scripts/a2ui_lit && npm ci --no-audit --no-fund --loglevel=error)
fi

# the official MCP Apps SDK (@modelcontextprotocol/ext-apps): the app the hosts (mcp-apps.js,
# agui-engine.js) are checked with in Chromium, from its own folder's lock file
if [ ! -d js-ext-apps/node_modules/@modelcontextprotocol/ext-apps ]; then
  echo "+ npm ci (tests/js-ext-apps)"
  (cd js-ext-apps && npm ci --no-audit --no-fund --loglevel=error)
fi
