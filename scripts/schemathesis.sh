#!/usr/bin/env bash
# Dev tool, not part of `npm test`: runs schemathesis (all checks) against a fresh local gateway
# and exits non-zero when it finds a failure. See docs/api.md ("Checking the document").
#
#   bash scripts/schemathesis.sh                  # 50 examples per operation
#   ST_MAX_EXAMPLES=200 bash scripts/schemathesis.sh
#   bash scripts/schemathesis.sh --include-path-regex '^/v1/cache'   # extra arguments go to `st run`
#
# schemathesis lives in a venv under .engines (git-ignored), never in the project's dependencies.
# The gateway runs with rate limits off on a temp data dir; a namespace and its owner key come
# from the CLI, and a signed-in, device-bound session (scripts/schemathesis-signin.mjs) covers
# the routes that refuse API keys. Two runs: the API key against every route that takes one, the
# session token against the routes that need a signed-in session (the document marks them with
# the `session` security scheme).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
venv="$root/.engines/venv-st"
if [[ ! -x "$venv/bin/st" ]]; then
  echo "schemathesis: creating $venv (once)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet schemathesis
fi
max_examples="${ST_MAX_EXAMPLES:-50}"
namespace="st-fuzz"
work="$(mktemp -d "${TMPDIR:-/tmp}/portico-st-XXXXXX")"
gateway_pid=""
cleanup() {
  if [[ -n "$gateway_pid" ]]; then kill "$gateway_pid" 2>/dev/null || true; wait "$gateway_pid" 2>/dev/null || true; fi
  if [[ "${ST_KEEP:-}" == "" ]]; then rm -rf "$work"; else echo "schemathesis: kept $work" >&2; fi
}
trap cleanup EXIT

data="$work/data"
mkdir -p "$data"
# A platform relay nobody listens on (the discard port of loopback): push counts as configured, so
# the send and topic routes are exercised past their 503, and every delivery is a per-device
# failure in the envelope.
PORTICO_RATE_LIMIT=false PORTICO_PUSH_RELAY_URL=http://127.0.0.1:9 node --import tsx src/main.ts serve --port 0 --data-dir "$data" >"$work/gateway.log" 2>&1 &
gateway_pid=$!
port=""
for _ in $(seq 1 300); do
  port="$(grep -o '"msg":"listening".*' "$work/gateway.log" 2>/dev/null | grep -o '"port":[0-9]*' | head -1 | cut -d: -f2 || true)"
  [[ -n "$port" ]] && break
  if ! kill -0 "$gateway_pid" 2>/dev/null; then cat "$work/gateway.log" >&2; echo "schemathesis: the gateway did not start" >&2; exit 1; fi
  sleep 0.2
done
[[ -n "$port" ]] || { cat "$work/gateway.log" >&2; echo "schemathesis: the gateway did not start in 60 s" >&2; exit 1; }
url="http://127.0.0.1:$port"
echo "schemathesis: gateway at $url (data $data)" >&2

api_key="$(node --import tsx src/main.ts namespace create "$namespace" --data-dir "$data" | tail -1 |
  node -e 'let s="";process.stdin.on("data",(c)=>s+=c).on("end",()=>process.stdout.write(JSON.parse(s).api_key))')"
token="$(node scripts/schemathesis-signin.mjs "$url" "$namespace" "$api_key")"

# Four runs, chosen by the document's own `x-portico-credential`: the open routes with no
# credential (a fetch capability must come alone), the routes that take any credential with the
# API key, the session-only routes with the signed-in session, the node-to-node routes bare. Hooks give strategies for the
# formats the document names (scripts/schemathesis_hooks.py); the config file lists the
# operations where a schema-valid request can still be refused with 400 (scripts/schemathesis.toml).
export SCHEMATHESIS_HOOKS="$root/scripts/schemathesis_hooks.py"
common=(--checks all --max-examples "$max_examples" --workers 1 --seed "${ST_SEED:-1}"
  --request-timeout 30 --suppress-health-check all --report junit --report-dir "$work/report")
status=0
cd "$work" # schemathesis keeps a .schemathesis cache in its working directory
run() {
  local what="$1" credential="$2"
  shift 2
  echo "schemathesis: $what" >&2
  "$venv/bin/st" --config-file "$root/scripts/schemathesis.toml" run "$url/v1/openapi.json" "${common[@]}" \
    --include-by "/x-portico-credential == \"$credential\"" "$@" || status=1
}
run "open routes, no credential" none "$@"
run "routes that take any credential, with the namespace owner's API key" any -H "Authorization: Bearer $api_key" "$@"
run "session-only routes, with a signed-in device-bound session" session -H "Authorization: Bearer $token" "$@"
# node-to-node routes: a caller with no coordination MAC must get a 4xx, whatever its body
run "node-to-node routes, no coordination MAC" peer "$@"
if [[ $status -ne 0 ]]; then echo "schemathesis: failures found (gateway log: $work/gateway.log; ST_KEEP=1 keeps it)" >&2; fi
exit $status
