#!/usr/bin/env bash
# The container image's smoke test (make test-image). Containers cannot be started on these machines (the runtime is
# refused its rlimits), so the image is mounted with buildah and its binary started by chroot inside the image's own
# file system — only what the image holds is there: no libc, no shell, the copied CA certificates and zone data — as
# the image's user (65532). Then the first call of the README, and statistics in a named time zone (zone data).
set -euo pipefail
image=${1:-switchboard:dev}
ctr=$(buildah from --quiet "$image")
mnt=$(buildah mount "$ctr")
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  if [ "${status:-1}" != 0 ] && [ -f /tmp/switchboard-image.log ]; then echo "--- server log"; tail -30 /tmp/switchboard-image.log; fi
  buildah umount "$ctr" >/dev/null || true
  buildah rm "$ctr" >/dev/null || true
}
trap 'status=$?; cleanup' EXIT

run() { chroot --userspec=65532:65532 "$mnt" /switchboard "$@"; }
[ ! -e "$mnt/bin/sh" ] || { echo "the image holds a shell: it is not FROM scratch"; exit 1; }
[ -s "$mnt/etc/ssl/certs/ca-certificates.crt" ] || { echo "the image has no CA certificates"; exit 1; }

export DATABASE_URL=file:/data/switchboard.db ZONEINFO=/usr/share/zoneinfo
run migrate >/dev/null
ws=$(run workspace create --name "Image" --json | sed -n 's/.*"id": *"\(ws_[^"]*\)".*/\1/p')
run workspace models --workspace "$ws" --all >/dev/null
key=$(run key create --workspace "$ws" --name image --scopes models:read,links:read,links:write --json |
  sed -n 's/.*"secret": *"\(sb_sk_[^"]*\)".*/\1/p')

port=18190
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
base="http://127.0.0.1:$port"
# chroot itself in the background (not a function's subshell), so that $! is the server and kill stops it.
chroot --userspec=65532:65532 "$mnt" /switchboard serve --addr "127.0.0.1:$port" >/tmp/switchboard-image.log 2>&1 &
server=$!
for _ in $(seq 100); do curl -fs "$base/readyz" >/dev/null 2>&1 && break; sleep 0.1; done

auth="Authorization: Bearer $key"
models=$(curl -fsS -H "$auth" "$base/api/v1/models")
echo "$models" | grep -q '"object":"list"' || { echo "models: $models"; exit 1; }
link=$(curl -fsS -X POST -H "$auth" -H 'Content-Type: application/json' "$base/api/v1/links" \
  -d '{"destination_url":"https://example.com/image"}' | sed -n 's/.*"id":"\(lnk_[^"]*\)".*/\1/p')
stats=$(curl -sS -o /dev/null -w '%{http_code}' -H "$auth" "$base/api/v1/links/$link/stats?interval=day&tz=Asia/Kolkata")
[ "$stats" = 200 ] || { echo "statistics in Asia/Kolkata: $stats (zone data missing?)"; exit 1; }
size=$(du -sh "$mnt" | cut -f1)
echo "image $image: the binary from the image's file system answered /api/v1/models and zoned statistics ($size)"
