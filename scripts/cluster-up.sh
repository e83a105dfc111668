#!/usr/bin/env bash
# Starts a local 3-node Portico cluster on this machine (docs/cluster.md, "A local cluster"):
# three gateways, each on a loopback address of its own (127.0.0.11-13, port 6001), each on its
# own voter of a three-voter rqlite registry, and one Redis (127.0.0.10:6379) they share.
#
#   scripts/cluster-up.sh [dir]          # start; data, logs and pids under dir (default ./cluster)
#   scripts/cluster-up.sh --edge [dir]   # the same, and each node's TLS edge (docs/edge.md) on
#                                        # https://127.0.0.1<i>:8443, certificates from a local CA
#   scripts/cluster-up.sh --down [dir]   # stop everything it started there
#
# Everything listens on loopback only. Content storage stays each gateway's embedded engine: Kubo
# and IPFS Cluster are not started (IPFS Cluster always attempts NAT port mapping). Needs rqlited
# (scripts/engines.sh rqlite) and redis-server (scripts/engines.sh redis). PORTICO_* variables set
# when it runs (PORTICO_OPERATORS, …) reach the three gateways.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${PORTICO_ENGINES_DIR:-$REPO_ROOT/.engines/bin}"
NODES=(1 2 3)
GATEWAY_PORT=6001

log() { printf '[cluster] %s\n' "$*"; }
die() { printf '[cluster] %s\n' "$*" >&2; exit 1; }

alive() { kill -0 "$1" 2>/dev/null; }

# Stops the processes listed in <dir>/pids, gateways first (their clean stop writes the registry),
# then the voters, then Redis; SIGKILL for any still running after 20 s.
down() {
  local dir=$1 pids=$1/pids
  [[ -f "$pids" ]] || die "nothing started in $dir (no $pids)"
  local kind pid
  for kind in edge gateway rqlited redis; do
    local group=()
    while read -r k pid; do [[ "$k" == "$kind" ]] && alive "$pid" && group+=("$pid"); done <"$pids"
    [[ ${#group[@]} -gt 0 ]] || continue
    kill -TERM "${group[@]}" 2>/dev/null || true
    local waited=0
    for pid in "${group[@]}"; do
      while alive "$pid" && [[ $waited -lt 200 ]]; do sleep 0.1; waited=$((waited + 1)); done
      alive "$pid" && kill -KILL "$pid" 2>/dev/null || true
    done
  done
  rm -f "$pids"
  log "stopped the cluster in $dir (its data stays there)"
}

# Waits (at most $3 seconds) until URL $2 answers 200; names $1 and shows the end of log $4 when
# it does not.
wait_ok() {
  local what=$1 url=$2 limit=$3 logfile=$4 i
  for ((i = 0; i < limit * 5; i++)); do
    [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$url" || true)" == "200" ]] && return 0
    sleep 0.2
  done
  tail -n 5 "$logfile" >&2 || true
  die "$what did not answer at $url within $limit s (logs in $DIR/logs)"
}

# Waits (at most $3 seconds) until URL $2 answers at all (any status).
wait_answers() {
  local what=$1 url=$2 limit=$3 logfile=$4 i
  for ((i = 0; i < limit * 5; i++)); do
    [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$url" || true)" != "000" ]] && return 0
    sleep 0.2
  done
  tail -n 5 "$logfile" >&2 || true
  die "$what did not answer at $url within $limit s (logs in $DIR/logs)"
}

if [[ "${1:-}" == "--down" ]]; then
  down "$(cd "${2:-$REPO_ROOT/cluster}" && pwd)"
  exit 0
fi

EDGE=0
if [[ "${1:-}" == "--edge" ]]; then
  EDGE=1
  shift
fi
EDGE_HTTPS_PORT=8443
BASE="${PORTICO_BASE_DOMAIN:-portico.localhost}"
EDGE_HTTP_PORT=8080
DIR="${1:-$REPO_ROOT/cluster}"
mkdir -p "$DIR/logs"
DIR="$(cd "$DIR" && pwd)"
if [[ -f "$DIR/pids" ]]; then
  while read -r _ pid; do alive "$pid" && die "a cluster already runs from $DIR: scripts/cluster-up.sh --down $DIR"; done <"$DIR/pids"
  rm -f "$DIR/pids"
fi
[[ -x "$BIN/rqlited" ]] || die "rqlited is not at $BIN/rqlited: run scripts/engines.sh rqlite"
command -v redis-server >/dev/null 2>&1 || die "redis-server is not on PATH: run scripts/engines.sh redis"
command -v curl >/dev/null 2>&1 || die "curl is needed to see the processes come up"
[[ $EDGE -eq 0 || -x "$BIN/portico-caddy" ]] || die "the edge is not at $BIN/portico-caddy: run scripts/engines.sh edge"

# compile src/ once, not three times at once
(cd "$REPO_ROOT" && node -e 'import("./scripts/build.mjs").then((m) => m.ensureBuilt())') || die "cannot compile src/"

[[ -f "$DIR/secret" ]] || { node -e 'process.stdout.write(require("crypto").randomBytes(32).toString("hex"))' >"$DIR/secret"; chmod 600 "$DIR/secret"; }
SECRET="$(cat "$DIR/secret")"
: >"$DIR/pids"
trap 'status=$?; [[ $status -eq 0 ]] || { log "start failed: stopping what started"; down "$DIR" || true; }' EXIT

mkdir -p "$DIR/redis"
# the cache refuses a Redis that would not evict (docs/cache.md): a bound and an LRU policy
nohup redis-server --bind 127.0.0.10 --port 6379 --protected-mode no --save "" --appendonly no --dir "$DIR/redis" \
  --maxmemory 256mb --maxmemory-policy allkeys-lru \
  >"$DIR/logs/redis.log" 2>&1 &
echo "redis $!" >>"$DIR/pids"

JOIN="127.0.0.11:4002,127.0.0.12:4002,127.0.0.13:4002"
for i in "${NODES[@]}"; do
  mkdir -p "$DIR/node-$i"
  nohup "$BIN/rqlited" -node-id "node-$i" -http-addr "127.0.0.1$i:4001" -raft-addr "127.0.0.1$i:4002" \
    -bootstrap-expect 3 -join "$JOIN" "$DIR/node-$i/rqlite" >"$DIR/logs/rqlited-$i.log" 2>&1 &
  echo "rqlited $!" >>"$DIR/pids"
done
for i in "${NODES[@]}"; do wait_ok "node-$i's rqlited" "http://127.0.0.1$i:4001/readyz" 60 "$DIR/logs/rqlited-$i.log"; done
log "rqlite: three voters ready"

# behind its edge a gateway takes the client the edge names (the edge connects from 127.0.0.1)
TRUSTED=""
[[ $EDGE -eq 1 ]] && TRUSTED="127.0.0.1"
for i in "${NODES[@]}"; do
  PORTICO_TRUSTED_PROXIES="${PORTICO_TRUSTED_PROXIES:-$TRUSTED}" PORTICO_SKIP_BUILD=1 PORTICO_HOST="127.0.0.1$i" PORTICO_NODE_ID="node-$i" PORTICO_SECRET="$SECRET" \
    PORTICO_RQLITE_URL="http://127.0.0.1$i:4001" PORTICO_REDIS_URL="redis://127.0.0.10:6379" \
    nohup node --enable-source-maps "$REPO_ROOT/bin/portico.mjs" serve --port "$GATEWAY_PORT" --data-dir "$DIR/node-$i/data" \
    >"$DIR/logs/gateway-$i.log" 2>&1 &
  echo "gateway $!" >>"$DIR/pids"
done
for i in "${NODES[@]}"; do wait_ok "node-$i's gateway" "http://127.0.0.1$i:$GATEWAY_PORT/health" 90 "$DIR/logs/gateway-$i.log"; done

# Starts node $1's edge, configured by `portico edge config`.
start_edge() {
  local i=$1
  PORTICO_SKIP_BUILD=1 node "$REPO_ROOT/bin/portico.mjs" edge config --internal-ca --listen "127.0.0.1$i" \
    --https-port "$EDGE_HTTPS_PORT" --http-port "$EDGE_HTTP_PORT" --gateway "http://127.0.0.1$i:$GATEWAY_PORT" \
    --data-dir "$DIR/node-$i/data" >"$DIR/node-$i/caddy.json" || die "portico edge config failed for node-$i"
  # Caddy's own files (none: its storage is the gateway's) stay under the node's directory
  HOME="$DIR/node-$i" XDG_CONFIG_HOME="$DIR/node-$i/caddy" XDG_DATA_HOME="$DIR/node-$i/caddy" \
    nohup "$BIN/portico-caddy" run --config "$DIR/node-$i/caddy.json" >"$DIR/logs/edge-$i.log" 2>&1 &
  echo "edge $!" >>"$DIR/pids"
  wait_answers "node-$i's edge" "http://127.0.0.1$i:$EDGE_HTTP_PORT/" 30 "$DIR/logs/edge-$i.log"
}

if [[ $EDGE -eq 1 ]]; then
  # node-1's edge first: it makes the local CA (Caddy does not lock that), which the others then
  # load from the store they share, so every node issues under one root
  start_edge 1
  TOKEN="$(cat "$DIR/node-1/data/edge.token")"
  ROOT=""
  for ((t = 0; t < 50; t++)); do
    ROOT="$(curl -s --max-time 2 -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
      -d '{"op":"load","key":"pki/authorities/local/root.crt"}' "http://127.0.0.11:$GATEWAY_PORT/v1/internal/tls-store" |
      node -e 'let t="";process.stdin.on("data",(c)=>t+=c).on("end",()=>{try{process.stdout.write(Buffer.from(JSON.parse(t).value,"base64"))}catch{}})')"
    [[ -n "$ROOT" ]] && break
    sleep 0.2
  done
  [[ -n "$ROOT" ]] || die "the edges' local CA root did not appear in the store (logs in $DIR/logs)"
  printf '%s\n' "$ROOT" >"$DIR/edge-root.crt"
  for i in "${NODES[@]}"; do [[ $i -eq 1 ]] || start_edge "$i"; done
fi

log "three nodes up:"
for i in "${NODES[@]}"; do log "  node-$i  http://127.0.0.1$i:$GATEWAY_PORT   (rqlite http://127.0.0.1$i:4001)"; done
log "Redis redis://127.0.0.10:6379; data, logs and pids in $DIR"
if [[ $EDGE -eq 1 ]]; then
  log "edges: https://127.0.0.1<i>:$EDGE_HTTPS_PORT for the hosts the platform serves, certificates from a local CA whose root is $DIR/edge-root.crt:"
  log "  curl --cacert $DIR/edge-root.crt --resolve api.$BASE:$EDGE_HTTPS_PORT:127.0.0.11 https://api.$BASE:$EDGE_HTTPS_PORT/health"
fi
log "make a wallet an operator (once): PORTICO_SECRET=\$(cat $DIR/secret) PORTICO_RQLITE_URL=http://127.0.0.11:4001 npx portico operator add <wallet> --data-dir $DIR/node-1/data"
log "stop it all: scripts/cluster-up.sh --down $DIR"
