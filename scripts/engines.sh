#!/usr/bin/env bash
# Installs the pinned engine binaries that the engine test suites run against.
#
#   scripts/engines.sh            # every engine implemented below
#   scripts/engines.sh rqlite     # only the named ones (rqlite, redis, kubo, ipfs-cluster, sandbox, socks, wrk, nftables, edge, coturn, sfu, chromium)
#   scripts/engines.sh --for-tests  # every engine; `npm test` runs this first: one line when all are
#                                   # present, else says what it builds and why it takes minutes
#
# redis-server is the exception: it is the Debian package (what the issue asks the suites to run
# against), installed with apt-get onto PATH rather than built into $BIN.
#
# Binaries land in $PORTICO_ENGINES_DIR (default <repo>/.engines/bin, git-ignored). Each engine
# writes a stamp file next to its binary naming the exact version it was built from, so a second
# run is a no-op and bumping a pin rebuilds only that engine.
#
# Only package registries are reachable from CI, so Go programs come from the Go module proxy
# and are built here; prebuilt release binaries are not an option.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${PORTICO_ENGINES_DIR:-$REPO_ROOT/.engines/bin}"
# Build trees live beside the binaries (not in /tmp) so an interrupted build can be inspected.
WORK="${PORTICO_ENGINES_WORK:-$REPO_ROOT/.engines/build}"

# --- pins -----------------------------------------------------------------------------------
# v8.36.0 is the newest rqlite release the module proxy reachable from CI serves: it refuses
# the version list and every v9.x / later v8.36.x tried (v9.4.5, v9.4.4, v9.1.2, v8.36.18,
# v8.36.14, v8.36.5, v8.36.1). The HTTP API the store uses is the same across v8 and v9.
RQLITE_MODULE="github.com/rqlite/rqlite/v8"
RQLITE_VERSION="v8.36.0"

# Kubo (the `ipfs` binary). The IPIP-499 `unixfs-v1-2025` import profile arrived in v0.40.0
# (v0.39.0 lacks it), which the module proxy reachable from CI refuses, as it does v0.44.0;
# v0.40.1 is served and is the pin. v0.41.0..v0.43.0 are served too, should a later pin be wanted.
KUBO_MODULE="github.com/ipfs/kubo"
KUBO_VERSION="v0.40.1"

# IPFS Cluster (`ipfs-cluster-service` and `ipfs-cluster-ctl`). v1.1.0 is the newest release
# the module proxy reachable from CI serves: it refuses v1.1.1, v1.1.2, v1.1.3 and v1.1.4
# (v1.0.8 is served too).
CLUSTER_MODULE="github.com/ipfs-cluster/ipfs-cluster"
CLUSTER_VERSION="v1.1.0"

# The TLS edge (docs/edge.md): Caddy with Portico's storage module and DNS provider, built from
# engines/caddy (its go.mod pins Caddy; its go.sum is complete), and Pebble, Let's Encrypt's ACME
# test server, for the edge's tests. The edge's stamp is its sources' hash.
EDGE_DIR="$REPO_ROOT/engines/caddy"
PEBBLE_MODULE="github.com/letsencrypt/pebble/v2"
PEBBLE_VERSION="v2.10.3"
edge_stamp() { (cd "$EDGE_DIR" && cat go.mod go.sum main.go portico/*.go | sha256sum | cut -c1-16); }

# The SFU of real-time media (docs/webrtc.md): a pion/webrtc program built from engines/sfu (its
# go.mod pins pion; its go.sum is complete). Its stamp is its sources' hash, as the edge's is.
SFU_DIR="$REPO_ROOT/engines/sfu"
sfu_stamp() { (cd "$SFU_DIR" && cat go.mod go.sum *.go | sha256sum | cut -c1-16); }

IMPLEMENTED=(rqlite redis kubo ipfs-cluster sandbox socks wrk nftables edge coturn sfu chromium)

# The deployment sandbox (src/layers/deployments/sandbox): bwrap from the Debian package, and two
# helpers compiled from their C sources (the socket-rules loader, and the last step before the app:
# environment, Landlock, seccomp); each stamp is its source's hash.
SANDBOX_DIR="$REPO_ROOT/src/layers/deployments/sandbox"
SANDBOX_HELPERS=(portico-sandbox-bpf portico-sandbox-exec)
sandbox_stamp() { sha256sum "$SANDBOX_DIR/$1.c" | cut -c1-16; }
sandbox_current() {
  local helper
  for helper in "${SANDBOX_HELPERS[@]}"; do is_current "$helper" "$(sandbox_stamp "$helper")" || return 1; done
}

log() { printf '[engines] %s\n' "$*" >&2; }
die() { printf '[engines] error: %s\n' "$*" >&2; exit 1; }

need() {
  command -v "$1" >/dev/null 2>&1 || die "$1 is required: $2"
}

# True when $1 is present and its stamp says it was built from exactly $2.
is_current() {
  local binary="$1" want="$2"
  [[ -x "$BIN/$binary" && -f "$BIN/.$binary.version" && "$(cat "$BIN/.$binary.version")" == "$want" ]]
}

stamp() {
  printf '%s\n' "$2" >"$BIN/.$1.version"
}

# Downloads a Go module at a version through the module proxy and prints its (read-only)
# directory in the module cache.
go_module_dir() {
  local module="$1" version="$2" json dir
  json="$(go mod download -json "$module@$version")" || die "go mod download $module@$version failed"
  dir="$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' | head -n 1)"
  [[ -n "$dir" && -d "$dir" ]] || die "no module directory for $module@$version in: $json"
  printf '%s\n' "$dir"
}

# Builds a module's commands inside a writable copy of the module at a version: replace and
# exclude directives in a go.mod apply only there (`go install pkg@version` refuses them).
# Arguments after GOFLAGS and LDFLAGS are binary=package pairs; each binary lands in $BIN and is
# stamped with module@version only once every build has succeeded.
build_in_module() {
  local module="$1" version="$2" goflags="$3" ldflags="$4"
  shift 4
  local src build pair
  src="$(go_module_dir "$module" "$version")"
  build="$WORK/${module##*/}-$version"
  rm -rf "$build"
  mkdir -p "$WORK" "$BIN"
  cp -R "$src" "$build"
  chmod -R u+w "$build"
  for pair in "$@"; do
    (
      cd "$build"
      GOFLAGS="$goflags -buildvcs=false" go build -trimpath -ldflags "$ldflags" -o "$BIN/${pair%%=*}.tmp" "${pair#*=}"
    ) || die "go build of ${pair%%=*} failed"
  done
  for pair in "$@"; do
    mv -f "$BIN/${pair%%=*}.tmp" "$BIN/${pair%%=*}"
    stamp "${pair%%=*}" "$module@$version"
  done
  rm -rf "$build"
  rmdir "$WORK" 2>/dev/null || true
}

# --- rqlite ---------------------------------------------------------------------------------
install_rqlite() {
  local want="$RQLITE_MODULE@$RQLITE_VERSION"
  if is_current rqlited "$want"; then
    log "rqlited $RQLITE_VERSION already installed"
    return 0
  fi
  need go "install Go (https://go.dev) to build rqlited"
  # rqlite's SQLite driver (rqlite/go-sqlite3) is cgo: without a C compiler the build fails.
  need gcc "rqlited needs cgo for its SQLite driver (apt-get install gcc)"

  log "building rqlited $RQLITE_VERSION (first build takes a few minutes)"
  local started=$SECONDS
  # rqlite's go.mod has replace directives; -mod=mod as its authors build it
  CGO_ENABLED=1 build_in_module "$RQLITE_MODULE" "$RQLITE_VERSION" "-mod=mod" \
    "-s -w -X $RQLITE_MODULE/cmd.Version=$RQLITE_VERSION" rqlited=./cmd/rqlited
  log "built rqlited $RQLITE_VERSION in $((SECONDS - started)) s"
}

# --- kubo -----------------------------------------------------------------------------------
install_kubo() {
  local want="$KUBO_MODULE@$KUBO_VERSION"
  if is_current ipfs "$want"; then
    log "ipfs (kubo) $KUBO_VERSION already installed"
    return 0
  fi
  need go "install Go (https://go.dev) to build ipfs (kubo)"

  log "building ipfs (kubo) $KUBO_VERSION (first build takes several minutes)"
  local started=$SECONDS
  # Kubo's go.mod has exclude directives. Its go.sum is complete, so -mod=readonly: the
  # module's own go.mod decides every dependency version.
  build_in_module "$KUBO_MODULE" "$KUBO_VERSION" "-mod=readonly" "-s -w" ipfs=./cmd/ipfs
  log "built ipfs (kubo) $KUBO_VERSION in $((SECONDS - started)) s"
}

# --- ipfs-cluster ---------------------------------------------------------------------------
install_ipfs_cluster() {
  local want="$CLUSTER_MODULE@$CLUSTER_VERSION"
  if is_current ipfs-cluster-service "$want" && is_current ipfs-cluster-ctl "$want"; then
    log "ipfs-cluster-service and ipfs-cluster-ctl $CLUSTER_VERSION already installed"
    return 0
  fi
  need go "install Go (https://go.dev) to build ipfs-cluster"

  log "building ipfs-cluster-service and ipfs-cluster-ctl $CLUSTER_VERSION (first build takes several minutes)"
  local started=$SECONDS
  build_in_module "$CLUSTER_MODULE" "$CLUSTER_VERSION" "-mod=readonly" "-s -w" \
    ipfs-cluster-service=./cmd/ipfs-cluster-service ipfs-cluster-ctl=./cmd/ipfs-cluster-ctl
  log "built ipfs-cluster-service and ipfs-cluster-ctl $CLUSTER_VERSION in $((SECONDS - started)) s"
}

# Builds one of Portico's own Go programs (engines/<dir>, its go.mod pinning its modules and its
# go.sum complete) into $BIN/<name>, stamped with the sources' hash `want`.
build_own() {
  local dir="$1" name="$2" want="$3" started=$SECONDS
  mkdir -p "$BIN"
  (
    cd "$dir"
    GOFLAGS="-mod=readonly -buildvcs=false" go build -trimpath -ldflags "-s -w" -o "$BIN/$name.tmp" .
  ) || die "go build of $name failed"
  mv -f "$BIN/$name.tmp" "$BIN/$name"
  stamp "$name" "$want"
  log "built $name in $((SECONDS - started)) s"
}

# --- the TLS edge ---------------------------------------------------------------------------
install_edge() {
  local want
  want="$(edge_stamp)"
  if is_current portico-caddy "$want"; then
    log "portico-caddy (the edge) already built from these sources"
  else
    need go "install Go (https://go.dev) to build the edge (Caddy)"
    log "building portico-caddy: Caddy with Portico's storage module and DNS provider (first build takes a few minutes)"
    build_own "$EDGE_DIR" portico-caddy "$want"
  fi
  if is_current pebble "$PEBBLE_MODULE@$PEBBLE_VERSION"; then
    log "pebble $PEBBLE_VERSION already installed"
    return 0
  fi
  need go "install Go (https://go.dev) to build pebble"
  log "building pebble $PEBBLE_VERSION (Let's Encrypt's ACME test server, for the edge's tests)"
  build_in_module "$PEBBLE_MODULE" "$PEBBLE_VERSION" "-mod=readonly" "-s -w" pebble=./cmd/pebble
}

# --- the SFU --------------------------------------------------------------------------------
install_sfu() {
  local want
  want="$(sfu_stamp)"
  if is_current portico-sfu "$want"; then
    log "portico-sfu (the SFU) already built from these sources"
    return 0
  fi
  need go "install Go (https://go.dev) to build the SFU (pion/webrtc)"
  log "building portico-sfu: the SFU of real-time media, on pion/webrtc (first build takes a minute)"
  build_own "$SFU_DIR" portico-sfu "$want"
}

# --- redis ----------------------------------------------------------------------------------
install_redis() {
  if command -v redis-server >/dev/null 2>&1; then
    log "redis-server already installed: $(redis-server --version)"
    return 0
  fi
  need apt-get "redis-server comes from the Debian package (apt-get install redis-server)"
  [[ $EUID -eq 0 ]] || die "installing redis-server needs root (CI runs this script as root; or: sudo apt-get install -y redis-server)"

  log "installing redis-server from the Debian archive"
  # The package's postinst starts a daemon on port 6379 when the init system lets it. The suites
  # start their own servers on free ports, so forbid that start (policy-rc.d exit 101 = "action
  # forbidden") unless the machine already has a policy of its own.
  local policy=/usr/sbin/policy-rc.d own_policy=0
  if [[ ! -e "$policy" ]]; then
    own_policy=1
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
  fi
  local status=0
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null || status=$?
  if [[ $own_policy -eq 1 ]]; then rm -f "$policy"; fi
  [[ $status -eq 0 ]] || die "apt-get install redis-server failed (exit $status)"
  command -v redis-server >/dev/null 2>&1 || die "redis-server is not on PATH after installing the package"
  log "installed $(redis-server --version)"
}

# --- sandbox --------------------------------------------------------------------------------
install_sandbox() {
  if ! command -v bwrap >/dev/null 2>&1; then
    need apt-get "bwrap comes from the Debian package (apt-get install bubblewrap)"
    [[ $EUID -eq 0 ]] || die "installing bubblewrap needs root (or: sudo apt-get install -y bubblewrap)"
    log "installing bubblewrap from the Debian archive"
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null 2>&1 ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; }; } ||
      die "apt-get install bubblewrap failed"
  fi
  local helper
  for helper in "${SANDBOX_HELPERS[@]}"; do
    if is_current "$helper" "$(sandbox_stamp "$helper")"; then
      log "$helper already built"
      continue
    fi
    need gcc "$helper is compiled from C (apt-get install gcc)"
    [[ -f /usr/include/linux/bpf.h ]] || die "$helper needs the kernel headers (apt-get install linux-libc-dev)"
    # static: portico-sandbox-exec runs inside the sandbox, whose /usr is the host's, but a static
    # binary loads nothing a tenant could have placed on a library path
    gcc -O2 -Wall -Wextra -Werror -static -o "$BIN/$helper.tmp" "$SANDBOX_DIR/$helper.c" || die "building $helper failed"
    mv -f "$BIN/$helper.tmp" "$BIN/$helper"
    stamp "$helper" "$(sandbox_stamp "$helper")"
    log "built $helper"
  done
}

# --- Debian packages ------------------------------------------------------------------------
# A tool that comes as a Debian package (of the same name unless given), onto PATH: installed once
# (as root), with one `apt-get update` retry for a stale package list.
install_debian_tool() {
  local tool=$1 package=${2:-$1}
  if command -v "$tool" >/dev/null 2>&1; then
    log "$tool already installed"
    return 0
  fi
  need apt-get "$tool comes from the Debian package (apt-get install $package)"
  [[ $EUID -eq 0 ]] || die "installing $package needs root (or: sudo apt-get install -y $package)"
  log "installing $package from the Debian archive"
  { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null 2>&1 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null; }; } ||
    die "apt-get install $package failed"
  command -v "$tool" >/dev/null 2>&1 || die "$tool is not on PATH after installing $package"
}

# --- socks ----------------------------------------------------------------------------------
# The anonymity proxy's SOCKS5 upstream in tests (docs/proxy.md): microsocks from the Debian package,
# started by test/support/socksServer.ts on loopback. Never tor: its defaults contact the network.
install_socks() { install_debian_tool microsocks; }

# --- coturn -------------------------------------------------------------------------------
# The TURN server of real-time media (docs/webrtc.md, "TURN"): the Debian package, onto PATH
# (`turnserver`, and `turnutils_uclient`, which the tests relay through it with). Installing it
# starts nothing: the package's service is off by default and this machine has no systemd.
install_coturn() {
  install_debian_tool turnserver coturn
  command -v turnutils_uclient >/dev/null 2>&1 || die "turnutils_uclient is not on PATH after installing coturn"
}

# --- chromium -----------------------------------------------------------------------------
# The browser of real-time media's browser test (test/e2e/webrtc.browser.test.ts): Debian's
# package, onto PATH, run headless with fake camera and microphone by test/support/chromium.ts.
# Installing it starts nothing. The package is large (about 100 MB with its libraries).
install_chromium() { install_debian_tool chromium; }

# --- wrk ------------------------------------------------------------------------------------
# The HTTP load generator of the benches (bench/floor, cache, sql, deploy; `npm run bench`): the
# Debian package, onto PATH.
install_wrk() { install_debian_tool wrk; }

# --- nftables -------------------------------------------------------------------------------
# `nft` cuts two nodes of the 3-node harness apart (test/support/clusterNetwork.ts), inside the
# suite's own network namespace: the Debian package, onto PATH.
install_nftables() { install_debian_tool nft nftables; }

# --- main -----------------------------------------------------------------------------------
# Prints the named engines that are absent or built from another pin.
missing_engines() {
  local engine
  for engine in "$@"; do
    case "$engine" in
      rqlite) is_current rqlited "$RQLITE_MODULE@$RQLITE_VERSION" || printf '%s\n' "rqlite" ;;
      redis) command -v redis-server >/dev/null 2>&1 || printf '%s\n' "redis" ;;
      kubo) is_current ipfs "$KUBO_MODULE@$KUBO_VERSION" || printf '%s\n' "kubo" ;;
      sandbox) { command -v bwrap >/dev/null 2>&1 && sandbox_current; } || printf '%s\n' "sandbox" ;;
      socks) command -v microsocks >/dev/null 2>&1 || printf '%s\n' "socks" ;;
      wrk) command -v wrk >/dev/null 2>&1 || printf '%s\n' "wrk" ;;
      nftables) command -v nft >/dev/null 2>&1 || printf '%s\n' "nftables" ;;
      chromium) command -v chromium >/dev/null 2>&1 || printf '%s\n' "chromium" ;;
      coturn) { command -v turnserver >/dev/null 2>&1 && command -v turnutils_uclient >/dev/null 2>&1; } || printf '%s\n' "coturn" ;;
      edge) { is_current portico-caddy "$(edge_stamp)" && is_current pebble "$PEBBLE_MODULE@$PEBBLE_VERSION"; } || printf '%s\n' "edge" ;;
      sfu) is_current portico-sfu "$(sfu_stamp)" || printf '%s\n' "sfu" ;;
      ipfs-cluster)
        { is_current ipfs-cluster-service "$CLUSTER_MODULE@$CLUSTER_VERSION" &&
          is_current ipfs-cluster-ctl "$CLUSTER_MODULE@$CLUSTER_VERSION"; } || printf '%s\n' "ipfs-cluster" ;;
    esac
  done
}

main() {
  local for_tests=0
  if [[ "${1:-}" == "--for-tests" ]]; then
    for_tests=1
    shift
  fi
  local engines=("$@")
  [[ ${#engines[@]} -gt 0 ]] || engines=("${IMPLEMENTED[@]}")
  mkdir -p "$BIN"
  local engine
  if [[ $for_tests -eq 1 ]]; then
    local missing
    missing="$(missing_engines "${engines[@]}" | tr '\n' ' ')"
    if [[ -z "$missing" ]]; then
      log "test engines present in $BIN (rqlited, ipfs, ipfs-cluster, portico-sandbox-bpf, portico-sandbox-exec, portico-caddy, pebble, portico-sfu) and on PATH (redis-server, bwrap, microsocks, nft, turnserver, chromium)"
      return 0
    fi
    log "npm test runs its suites against the real engines: rqlited, redis-server, Kubo (ipfs) and IPFS Cluster."
    log "missing here: ${missing% }. Installing them now; later runs find them and skip this step."
    log "the first time takes minutes: rqlited, ipfs, ipfs-cluster, the edge (Caddy), pebble and the SFU are compiled from source with Go"
    log "(the module proxy is the only source reachable from CI), and redis-server, coturn and chromium come from apt-get."
  fi
  for engine in "${engines[@]}"; do
    case "$engine" in
      rqlite) install_rqlite ;;
      redis) install_redis ;;
      kubo) install_kubo ;;
      ipfs-cluster) install_ipfs_cluster ;;
      sandbox) install_sandbox ;;
      socks) install_socks ;;
      wrk) install_wrk ;;
      nftables) install_nftables ;;
      edge) install_edge ;;
      coturn) install_coturn ;;
      chromium) install_chromium ;;
      sfu) install_sfu ;;
      *) die "unknown engine '$engine' (implemented: ${IMPLEMENTED[*]})" ;;
    esac
  done
  log "binaries are in $BIN:"
  for engine in "${engines[@]}"; do
    case "$engine" in
      rqlite) printf '%s\n' "$BIN/rqlited" ;;
      redis) command -v redis-server ;;
      kubo) printf '%s\n' "$BIN/ipfs" ;;
      ipfs-cluster) printf '%s\n' "$BIN/ipfs-cluster-service" "$BIN/ipfs-cluster-ctl" ;;
      sandbox) command -v bwrap; printf '%s\n' "$BIN/portico-sandbox-bpf" "$BIN/portico-sandbox-exec" ;;
      socks) command -v microsocks ;;
      wrk) command -v wrk ;;
      nftables) command -v nft ;;
      edge) printf '%s\n' "$BIN/portico-caddy" "$BIN/pebble" ;;
      coturn) command -v turnserver ;;
      chromium) command -v chromium ;;
      sfu) printf '%s\n' "$BIN/portico-sfu" ;;
    esac
  done
}

main "$@"
