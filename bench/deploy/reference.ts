/**
 * bench/deploy's reference proxy: nginx in front of the same app, doing what the gateway does for
 * it (the client's `Host` passed, `X-Forwarded-*` set, HTTP/1.1 kept-alive connections to the
 * app), measured in the same rounds as the gateway and the app called directly. It answers the
 * question the target's ratio alone cannot: how near 0.7 a proxy written in C, one of the fastest
 * there are, gets on this machine with this app and this load, so the gateway's ratio can be read
 * against what any proxy here pays for the hop (a second pair of loopback sends and receives a
 * request).
 *
 * nginx runs as the gateway runs in the layout: on the server's CPUs with one worker per CPU
 * (`one-cpu`: one worker on CPU 0; `free`: two, unpinned). It comes from Debian's `nginx-light`;
 * DEPLOY_REFERENCE=none leaves it out.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { type Child, startPinned, waitUntil } from "../support/children.js"

export interface Reference {
  readonly child: Child
  readonly url: string
  /** The master and its workers, for CPU accounting. */
  readonly pids: () => ReadonlyArray<string>
}

const config = (dir: string, port: number, appPort: number, workers: number) => `
# bench only: loopback, root's workers keep the temp paths in the run's own (0700) directory
user root;
daemon off;
worker_processes ${workers};
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream app { server 127.0.0.1:${appPort}; keepalive 128; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $remote_addr;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Host $host;
    }
  }
}
`

const nginxBinary = () => {
  for (const candidate of ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"]) {
    if (fs.existsSync(candidate)) return candidate
  }
  const which = spawnSync("sh", ["-c", "command -v nginx"], { encoding: "utf8" }).stdout.trim()
  if (which !== "") return which
  throw new Error("nginx not found, the reference proxy: apt-get install nginx-light (or DEPLOY_REFERENCE=none to leave it out)")
}

/** Children of `pid` (nginx's workers). */
const childrenOf = (pid: string) =>
  spawnSync("pgrep", ["-P", pid], { encoding: "utf8" }).stdout.split("\n").filter((l) => l !== "")

export const startReference = async (dir: string, port: number, appPort: number, layout: "one-cpu" | "free"): Promise<Reference> => {
  const home = path.join(dir, "nginx")
  fs.mkdirSync(home)
  const file = path.join(home, "nginx.conf")
  fs.writeFileSync(file, config(home, port, appPort, layout === "free" ? 2 : 1))
  const child = startPinned("nginx", dir, nginxBinary(), ["-p", home, "-c", file])
  const master = String(child.process.pid)
  const pids = () => [master, ...childrenOf(master)]
  const url = `http://127.0.0.1:${port}`
  await waitUntil(child, async () => (await fetch(url).catch(() => undefined)) !== undefined, 10_000)
  // free: master and workers on both CPUs (the workers were forked onto CPU 0 before this)
  if (layout === "free") for (const pid of pids()) spawnSync("taskset", ["-a", "-p", "-c", "0,1", pid])
  return { child, url, pids }
}
