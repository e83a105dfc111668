/**
 * Every `portico` command: words, options, help text. Bodies are imported when a command runs, so
 * listing and parsing stay free of the gateway's modules.
 */
import { checkPrint, type Command, type Options, printDetail, printOption } from "./Cli.js"

const dataDir: Options = { "data-dir": { type: "string" } }
const dataDirDetail = ["--data-dir DIR", "the data dir holding the registry (default PORTICO_DATA_DIR or ./data)"] as const

export const commands: ReadonlyArray<Command> = [
  {
    words: ["serve"],
    summary: "Run the gateway until SIGINT/SIGTERM (npm start runs this).",
    synopsis: "[--port N] [--host H] [--data-dir DIR]",
    details: [
      ["--port N", "listen port (default PORTICO_PORT or 6001; 0 picks a free one)"],
      ["--host H", "listen address (default PORTICO_HOST or 127.0.0.1)"],
      dataDirDetail
    ],
    notes: ["Every other setting comes from the environment: see README.md, Configuration."],
    options: { port: { type: "string" }, host: { type: "string" }, ...dataDir },
    maxPositionals: 0,
    run: async (parsed) => (await import("./serve.js")).serve(parsed)
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
    synopsis: "DIR --name NAME [--type T] [--subdomain S] [--update] [--env K=V]... [--env-file F] [--health-check P] [--ssr] [--skip-install] [--url URL] [--token T]",
    details: [
      ["DIR", "the app's directory"],
      ["--name NAME", "the deployment's name: 1-56 of letters, digits, '-' and '_'"],
      ["--type T", "static, nextjs, go or nodejs (default: detected: go.mod, next.config or a next dependency, package.json, else static)"],
      ["--subdomain S", "first deploy: serve on S.<base domain> instead of <name>-<random>.<base domain>"],
      ["--update", "deploy a new version of an existing deployment"],
      ["--env K=V", "first deploy: an environment variable (repeatable; overrides --env-file)"],
      ["--env-file F", "first deploy: KEY=VALUE lines (# comments, one layer of quotes removed, no $VAR)"],
      ["--health-check P", "the path answering 200 when the app is ready (default /health; not for static)"],
      ["--ssr", "Next.js: build the standalone server (output: \"standalone\"); without it the app is exported as a static site"],
      ["--skip-install", "Node.js: use the uploaded node_modules as it is"],
      ["--url URL", "the gateway (default PORTICO_URL or http://127.0.0.1:6001)"],
      ["--token T", "an admin API key or a developer's access token (default PORTICO_TOKEN)"],
      ["--json", "print the whole deployment record instead of the URL line"]
    ],
    notes: [
      "Go apps are compiled here (CGO_ENABLED=0 GOOS=linux GOARCH=amd64) and Next.js apps built here; the gateway runs what it receives.",
      "Progress goes to stderr; stdout gets `NAME version N (TYPE, STATUS): URL`."
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
  }
]
