/** The deployed Node.js app the deploy and cluster benches measure: one small JSON answer on every path. */
export const BENCH_APP = `const http = require("node:http")
const body = JSON.stringify({ ok: true, service: "bench", items: [1, 2, 3] })
http.createServer((req, res) => {
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
  res.end(body)
}).listen(Number(process.env.PORT), "0.0.0.0")
`
