/**
 * Every `portico` command: words, options, help text. Bodies are imported when a command runs, so
 * listing and parsing stay free of the gateway's modules.
 */
import { checkPrint, type Command, type Options, printDetail, printOption } from "./Cli.js"

/** `--url`, `--token` and `--json`: every command that talks to a running gateway. */
const gateway: Options = { url: { type: "string" }, token: { type: "string" }, json: { type: "boolean" } }
const gatewayDetails: ReadonlyArray<readonly [string, string]> = [
  ["--url URL", "the gateway (default PORTICO_URL or http://127.0.0.1:6001)"],
  ["--token T", "an admin API key or a developer's access token (default PORTICO_TOKEN)"],
  ["--json", "print the route's answer as one JSON line instead"]
]
const nameDetail = ["NAME", "the deployment's name in the namespace"] as const

const functionName = ["NAME", "the function's name: 1-63 lowercase letters, digits and -, starting with a letter"] as const

/** `portico functions …`: serverless functions (src/cli/functions.ts, docs/functions.md). */
const functionCommands: ReadonlyArray<Command> = [
  {
    words: ["functions", "deploy"],
    summary: "Deploy a WebAssembly module, or build a Go function's directory (GOOS=wasip1 GOARCH=wasm) and deploy it, as the function's next version.",
    synopsis: "FILE.wasm|DIR --name NAME [--memory MB] [--timeout S] [--public|--private] [--env K=V]... [--url URL] [--token T] [--json]",
    details: [
      ["FILE.wasm|DIR", "a built module (a WASI command), or a directory with go.mod, built here"],
      ["--name NAME", "the function's name: 1-63 lowercase letters, digits and -, starting with a letter"],
      ["--memory MB", "its memory limit, 1-256 (default 64; a redeploy keeps the current one)"],
      ["--timeout S", "its deadline in seconds, 1-60 (default 30)"],
      ["--public", "invocable without a credential at /v1/invoke/<namespace>/<name>"],
      ["--private", "no longer public"],
      ["--env K=V", "an environment variable (repeatable; replaces the whole environment)"],
      ...gatewayDetails
    ],
    notes: ["Progress goes to stderr; stdout gets `NAME version N (MB, S)`. A module importing a host call the gateway does not offer is refused, naming it."],
    options: {
      ...gateway,
      name: { type: "string" },
      memory: { type: "string" },
      timeout: { type: "string" },
      public: { type: "boolean" },
      private: { type: "boolean" },
      env: { type: "string", multiple: true }
    },
    maxPositionals: 1,
    run: async (parsed) => (await import("./functions.js")).deploy(parsed)
  },
  {
    words: ["functions", "list"],
    summary: "List the namespace's functions, one `NAME version N (MB, S)` line each.",
    synopsis: "[--url URL] [--token T] [--json]",
    details: gatewayDetails,
    options: gateway,
    maxPositionals: 0,
    run: async (parsed) => (await import("./functions.js")).list(parsed)
  },
  {
    words: ["functions", "invoke"],
    summary: "Invoke a function with --data as its input and print its answer as one JSON line.",
    synopsis: "NAME [--data TEXT] [--url URL] [--token T]",
    details: [functionName, ["--data TEXT", "the input, as the function reads it on stdin (default empty)"], ...gatewayDetails.slice(0, 2)],
    options: { url: { type: "string" }, token: { type: "string" }, data: { type: "string" } },
    maxPositionals: 1,
    run: async (parsed) => (await import("./functions.js")).invoke(parsed)
  },
  {
    words: ["functions", "logs"],
    summary: "Print a function's latest log lines, oldest first: time, level, request id, message.",
    synopsis: "NAME [--lines N] [--url URL] [--token T] [--json]",
    details: [functionName, ["--lines N", "how many, 1-1000 (default 100)"], ...gatewayDetails],
    options: { ...gateway, lines: { type: "string" } },
    maxPositionals: 1,
    run: async (parsed) => (await import("./functions.js")).logs(parsed)
  },
  {
    words: ["functions", "delete"],
    summary: "Delete a function with its versions, secrets and logs.",
    synopsis: "NAME [--url URL] [--token T] [--json]",
    details: [functionName, ...gatewayDetails],
    options: gateway,
    maxPositionals: 1,
    run: async (parsed) => (await import("./functions.js")).remove(parsed)
  }
]

/** `portico deployments …`: the management routes after a deploy (src/cli/deployments.ts). */
const deploymentCommands: ReadonlyArray<Command> = [
  {
    words: ["deployments", "list"],
    summary: "List the namespace's deployments, one `NAME version N (TYPE, STATUS): URL` line each.",
    synopsis: "[--url URL] [--token T] [--json]",
    details: gatewayDetails,
    options: gateway,
    maxPositionals: 0,
    run: async (parsed) => (await import("./deployments.js")).list(parsed)
  },
  {
    words: ["deployments", "get"],
    summary: "Show one deployment: its URL line, health path and last change.",
    synopsis: "NAME [--url URL] [--token T] [--json]",
    details: [nameDetail, ...gatewayDetails],
    options: gateway,
    maxPositionals: 1,
    run: async (parsed) => (await import("./deployments.js")).get(parsed)
  },
  {
    words: ["deployments", "logs"],
    summary: "Print the last lines of an app's output (stdout and stderr, the gateway's own lines prefixed [portico]).",
    synopsis: "NAME [--lines N] [--url URL] [--token T] [--json]",
    details: [nameDetail, ["--lines N", "how many of the last lines, 1 to 1000 (default 100)"], ...gatewayDetails],
    options: { lines: { type: "string" }, ...gateway },
    maxPositionals: 1,
    run: async (parsed) => (await import("./deployments.js")).logs(parsed)
  },
  {
    words: ["deployments", "env"],
    summary: "List the names of a deployment's environment, or change it (a running app is restarted with it).",
    synopsis: "NAME [--set K=V]... [--env-file F] [--unset K]... [--url URL] [--token T] [--json]",
    details: [
      nameDetail,
      ["--set K=V", "set a variable (repeatable; overrides the same name from --env-file)"],
      ["--env-file F", "set the KEY=VALUE lines of a file (as deploy --env-file reads it)"],
      ["--unset K", "remove a variable (repeatable)"],
      ...gatewayDetails
    ],
    notes: ["Values are never printed: the gateway answers names only."],
    options: { set: { type: "string", multiple: true }, "env-file": { type: "string" }, unset: { type: "string", multiple: true }, ...gateway },
    maxPositionals: 1,
    run: async (parsed) => (await import("./deployments.js")).env(parsed)
  },
  {
    words: ["deployments", "versions"],
    summary: "List a deployment's versions, newest first, the current one marked *.",
    synopsis: "NAME [--url URL] [--token T] [--json]",
    details: [nameDetail, ...gatewayDetails],
    options: gateway,
    maxPositionals: 1,
    run: async (parsed) => (await import("./deployments.js")).versions(parsed)
  },
  {
    words: ["deployments", "rollback"],
    summary: "Serve an earlier version again (as a new version; an app is started and must get healthy).",
    synopsis: "NAME --to N [--url URL] [--token T] [--json]",
    details: [nameDetail, ["--to N", "the version to serve again (see `portico deployments versions NAME`)"], ...gatewayDetails],
    options: { to: { type: "string" }, ...gateway },
    maxPositionals: 1,
    run: async (parsed) => (await import("./deployments.js")).rollback(parsed)
  },
  {
    words: ["deployments", "delete"],
    summary: "Delete a deployment: its process, versions, events, domains and content; the name and host are free again.",
    synopsis: "NAME [--url URL] [--token T] [--json]",
    details: [nameDetail, ...gatewayDetails],
    options: gateway,
    maxPositionals: 1,
    run: async (parsed) => (await import("./deployments.js")).remove(parsed)
  },
  {
    words: ["deployments", "domains"],
    summary: "List a deployment's custom domains, or add, verify (its DNS TXT record) or remove one.",
    synopsis: "NAME [--add D | --verify D | --remove D] [--url URL] [--token T] [--json]",
    details: [
      nameDetail,
      ["--add D", "add the domain D and print the TXT record to publish"],
      ["--verify D", "check D's TXT record; once verified D serves the deployment"],
      ["--remove D", "stop serving on D"],
      ...gatewayDetails
    ],
    options: { add: { type: "string" }, verify: { type: "string" }, remove: { type: "string" }, ...gateway },
    maxPositionals: 1,
    run: async (parsed) => (await import("./deployments.js")).domains(parsed)
  }
]

const dataDir: Options = { "data-dir": { type: "string" } }
const dataDirDetail = ["--data-dir DIR", "the data dir holding the registry (default PORTICO_DATA_DIR or ./data)"] as const

export const commands: ReadonlyArray<Command> = [
  {
    words: ["serve"],
    summary: "Run the gateway until SIGINT/SIGTERM (npm start runs this).",
    synopsis: "[--port N] [--host H] [--data-dir DIR] [--join INVITE]",
    details: [
      ["--port N", "listen port (default PORTICO_PORT or 6001; 0 picks a free one)"],
      ["--host H", "listen address (default PORTICO_HOST or 127.0.0.1)"],
      dataDirDetail,
      ["--join INVITE", "first start of a new node: join the cluster with an invite from POST /v1/node/enroll (an empty data dir; ignored once joined)"]
    ],
    notes: ["Every other setting comes from the environment: see README.md, Configuration."],
    options: { port: { type: "string" }, host: { type: "string" }, join: { type: "string" }, ...dataDir },
    maxPositionals: 0,
    run: async (parsed) => (await import("./serve.js")).serve(parsed)
  },
  {
    words: ["edge", "config"],
    summary: "Print the Caddy configuration of this node's TLS edge (run Caddy with it: docs/edge.md).",
    synopsis: "[--acme-ca URL | --internal-ca] [--email E] [--wildcard] [--https-port N] [--http-port N] [--listen HOST] [--gateway URL] [--trusted-roots a.pem,b.pem] [--resolvers host:port,...] [--data-dir DIR]",
    details: [
      ["--acme-ca URL", "the ACME CA's directory (default Let's Encrypt's)"],
      ["--email E", "the ACME account's contact address"],
      ["--internal-ca", "certificates from Caddy's own local CA, shared by the nodes, instead of an ACME CA (a cluster on one machine; scripts/cluster-up.sh --edge)"],
      ["--wildcard", "one certificate for the base domain and *.<base> by DNS-01 through this gateway (its DNS answers _acme-challenge: docs/edge.md)"],
      ["--https-port N", "HTTPS port (default 443)"],
      ["--http-port N", "plain HTTP port: ACME HTTP-01 challenges and redirects (default 80)"],
      ["--listen HOST", "the address the edge listens on (default every address)"],
      ["--gateway URL", "the gateway as the edge reaches it (default http://<PORTICO_HOST>:<PORTICO_PORT>)"],
      ["--trusted-roots FILES", "PEM files of roots to trust for the ACME CA's own HTTPS"],
      ["--resolvers LIST", "DNS servers to check DNS-01 records with"],
      dataDirDetail
    ],
    notes: ["The node's edge token (<data dir>/edge.token, mode 0600) is made if absent; the edge reads it, so run the edge as a user who may."],
    options: {
      "acme-ca": { type: "string" },
      "internal-ca": { type: "boolean" },
      email: { type: "string" },
      wildcard: { type: "boolean" },
      "https-port": { type: "string" },
      "http-port": { type: "string" },
      listen: { type: "string" },
      gateway: { type: "string" },
      "trusted-roots": { type: "string" },
      resolvers: { type: "string" },
      ...dataDir
    },
    maxPositionals: 0,
    run: async (parsed) => (await import("./edge.js")).edgeConfig(parsed)
  },
  {
    words: ["namespace", "create"],
    summary: "Create a namespace and print its owner-level admin API key (works with or without a running gateway).",
    synopsis: "NAME [--owner WALLET] [--print FIELD] [--data-dir DIR]",
    details: [
      ["NAME", "3-63 characters of a-z, 0-9 and inner hyphens"],
      ["--owner WALLET", "the owner's wallet address (0x + 40 hex), who can then sign in"],
      printDetail("namespace, api_key, key_id, owner"),
      dataDirDetail
    ],
    options: { owner: { type: "string" }, ...printOption, ...dataDir },
    maxPositionals: 1,
    run: async (parsed) => {
      checkPrint(parsed, ["namespace", "api_key", "key_id", "owner"])
      return (await import("./registry.js")).namespaceCreate(parsed)
    }
  },
  {
    words: ["operator", "add"],
    summary: "Put a wallet on the operator list (the operator plane's bootstrap; works with or without a running gateway).",
    synopsis: "WALLET [--print FIELD] [--data-dir DIR]",
    details: [["WALLET", "the operator's wallet address (0x + 40 hex), who then signs in to the platform realm"], printDetail("wallet, added"), dataDirDetail],
    options: { ...printOption, ...dataDir },
    maxPositionals: 1,
    run: async (parsed) => {
      checkPrint(parsed, ["wallet", "added"])
      return (await import("./operators.js")).operatorAdd(parsed)
    }
  },
  {
    words: ["keys", "create"],
    summary: "Mint an API key in a namespace (works with or without a running gateway).",
    synopsis: "--namespace NAME (--scopes a,b | --profile admin|runtime) [--label L] [--expires-in-days N] [--print FIELD] [--data-dir DIR]",
    details: [
      ["--namespace NAME", "the namespace"],
      ["--scopes a,b", "grants, e.g. cache,invoke or cache:key=sessions/*"],
      ["--profile P", "admin or runtime instead of --scopes"],
      ["--label L", "a label to recognise the key by"],
      ["--expires-in-days N", "expire after N days (default never)"],
      printDetail("id, api_key, namespace, label, role, scopes, expires_at"),
      dataDirDetail
    ],
    options: {
      namespace: { type: "string" },
      scopes: { type: "string" },
      profile: { type: "string" },
      label: { type: "string" },
      "expires-in-days": { type: "string" },
      ...printOption,
      ...dataDir
    },
    maxPositionals: 0,
    run: async (parsed) => {
      checkPrint(parsed, ["id", "api_key", "namespace", "label", "role", "scopes", "expires_at"])
      return (await import("./registry.js")).keysCreate(parsed)
    }
  },
  {
    words: ["wallet", "new"],
    summary: "Make a new wallet key (secp256k1) in a file and print its address.",
    synopsis: "--out FILE",
    details: [["--out FILE", "where the private key goes (created with mode 0600; never overwritten)"]],
    options: { out: { type: "string" } },
    maxPositionals: 0,
    run: async (parsed) => (await import("./login.js")).walletNew(parsed)
  },
  {
    words: ["wallet", "address"],
    summary: "Print the address of a wallet key file.",
    synopsis: "--wallet-key-file FILE",
    details: [["--wallet-key-file FILE", "a key file made by `portico wallet new`"]],
    options: { "wallet-key-file": { type: "string" } },
    maxPositionals: 0,
    run: async (parsed) => (await import("./login.js")).walletAddress(parsed)
  },
  {
    words: ["login"],
    summary: "Sign a wallet in to a namespace, or to the platform realm, on a running gateway (EIP-4361 challenge, personal_sign, verify) and print the access token.",
    synopsis: "[--namespace NAME] --wallet-key-file FILE [--url URL] [--json]",
    details: [
      ["--namespace NAME", "the namespace to sign in to (the wallet must be its owner or a member); absent: the platform realm, to create namespaces (POST /v1/namespaces) or act as an operator"],
      ["--wallet-key-file FILE", "a key file made by `portico wallet new`"],
      ["--url URL", "the gateway (default PORTICO_URL or http://127.0.0.1:6001)"],
      ["--json", "print the whole answer (refresh token, session id, expiry) instead of the token"]
    ],
    options: {
      namespace: { type: "string" },
      "wallet-key-file": { type: "string" },
      url: { type: "string" },
      json: { type: "boolean" }
    },
    maxPositionals: 0,
    run: async (parsed) => (await import("./login.js")).login(parsed)
  },
  {
    words: ["deploy"],
    summary: "Build (Go, Next.js), pack and upload an app's directory to a running gateway, and print its URL.",
    synopsis: "DIR --name NAME [--type T] [--subdomain S] [--update] [--env K=V]... [--env-file F] [--health-check P] [--ssr] [--skip-install] [--url URL] [--token T] [--json]",
    details: [
      ["DIR", "the app's directory"],
      ["--name NAME", "the deployment's name: 1-56 of letters, digits, '-' and '_'"],
      ["--type T", "static, nextjs, go or nodejs (default: detected: go.mod, next.config or a next dependency, package.json, else static)"],
      ["--subdomain S", "first deploy: serve on S.<base domain> instead of <name>-<random>.<base domain>"],
      ["--update", "deploy a new version of an existing deployment"],
      ["--env K=V", "first deploy: an environment variable (repeatable; overrides --env-file)"],
      ["--env-file F", "first deploy: KEY=VALUE lines (# comments, one layer of quotes removed, no $VAR)"],
      ["--health-check P", "the path answering 200 when the app is ready (default /health; not for static); with --update it replaces the deployment's"],
      ["--ssr", "Next.js: build the standalone server (output: \"standalone\"); without it the app is exported as a static site"],
      ["--skip-install", "Node.js: use the uploaded node_modules as it is"],
      ["--url URL", "the gateway (default PORTICO_URL or http://127.0.0.1:6001)"],
      ["--token T", "an admin API key or a developer's access token (default PORTICO_TOKEN)"],
      ["--json", "print the whole deployment record instead of the URL line"]
    ],
    notes: [
      "Go apps are compiled here (CGO_ENABLED=0 GOOS=linux GOARCH=amd64) and Next.js apps built here; the gateway runs what it receives.",
      "The name is checked with the gateway first: a taken name (without --update) is refused before any build or upload.",
      "Progress goes to stderr (the upload, then what the gateway does: installing, starting and the health path it waits for); stdout gets `NAME version N (TYPE, STATUS): URL`.",
      "Afterwards: `portico deployments --help` (logs, env, versions, rollback, delete, domains)."
    ],
    options: {
      name: { type: "string" },
      type: { type: "string" },
      subdomain: { type: "string" },
      update: { type: "boolean" },
      env: { type: "string", multiple: true },
      "env-file": { type: "string" },
      "health-check": { type: "string" },
      ssr: { type: "boolean" },
      "skip-install": { type: "boolean" },
      url: { type: "string" },
      token: { type: "string" },
      json: { type: "boolean" }
    },
    maxPositionals: 1,
    run: async (parsed) => (await import("./deploy/deploy.js")).deploy(parsed)
  },
  ...deploymentCommands,
  ...functionCommands
]
