#!/usr/bin/env bash
# The SDKs' round trip (make test-sdk): builds the server, starts it on a fresh SQLite database on a free loopback
# port, makes a workspace and a key with the CLI, then runs the Go SDK's and the TypeScript SDK's round-trip tests
# against it (models, a link, a webhook, two sandbox instances and a message). The server stops when this exits.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  if [ "${status:-1}" != 0 ] && [ -f "$dir/server.log" ]; then echo "--- server log"; tail -50 "$dir/server.log"; fi
  rm -rf "$dir"
}
trap 'status=$?; cleanup' EXIT

go build -o "$dir/switchboard" .
export DATABASE_URL="file:$dir/switchboard.db"

port=18090
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
base="http://127.0.0.1:$port"

"$dir/switchboard" migrate >/dev/null
ws=$("$dir/switchboard" workspace create --name "SDK round trip" --json | sed -n 's/.*"id": *"\(ws_[^"]*\)".*/\1/p')
"$dir/switchboard" workspace models --workspace "$ws" --all >/dev/null
key=$("$dir/switchboard" key create --workspace "$ws" --name sdk --json \
  --scopes models:read,links:read,links:write,webhooks:read,webhooks:write,messaging:read,messaging:write |
  sed -n 's/.*"secret": *"\(sb_sk_[^"]*\)".*/\1/p')
[ -n "$ws" ] && [ -n "$key" ] || { echo "could not make a workspace key"; exit 1; }

"$dir/switchboard" serve --addr "127.0.0.1:$port" --base-url "$base" --send-rate 0 --webhook-allow-http --webhook-allowed-networks 127.0.0.0/8 >"$dir/server.log" 2>&1 &
server=$!
for _ in $(seq 100); do
  curl -fs "$base/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fs "$base/readyz" >/dev/null || { echo "the server did not start"; exit 1; }

export SWITCHBOARD_URL="$base" SWITCHBOARD_API_KEY="$key"
echo "--- Go SDK (sdk/go) against $base"
(cd sdk/go && go test -count=1 -run TestRoundTrip -v ./...)
echo "--- TypeScript SDK (sdk/typescript) against $base"
(cd sdk/typescript && npm test --silent)
