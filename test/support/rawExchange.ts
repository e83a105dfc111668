/**
 * One HTTP request over a fresh connection with its body sent exactly as given (no client-side
 * encoding), and the answer as the wire had it: for comparing two gateways' answers byte for byte
 * (the fast lane's against the app's). Every header is kept but the clock's.
 */
import * as http from "node:http"

export interface RawExchange {
  readonly method: string
  readonly path: string
  readonly headers?: Readonly<Record<string, string>>
  readonly body?: string | Uint8Array
}

export interface RawAnswer {
  readonly status: number
  readonly headers: Readonly<Record<string, string | undefined>>
  readonly body: Buffer
}

export const sendRaw = (port: number, exchange: RawExchange): Promise<RawAnswer> =>
  new Promise((resolve, reject) => {
    const body = exchange.body === undefined ? undefined : Buffer.from(exchange.body)
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        method: exchange.method,
        path: exchange.path,
        agent: false,
        headers: { ...exchange.headers, ...(body === undefined ? {} : { "content-length": String(body.length) }) }
      },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: Object.fromEntries(
              Object.entries(res.headers)
                .filter(([name]) => name !== "date")
                .map(([name, value]) => [name, Array.isArray(value) ? value.join(", ") : value])
            ),
            body: Buffer.concat(chunks)
          })
        )
        res.on("error", reject)
      }
    )
    // a body over the cap is refused at its headers: the connection may close while it is sent
    req.on("error", (e: NodeJS.ErrnoException) => (e.code === "EPIPE" || e.code === "ECONNRESET" ? undefined : reject(e)))
    req.end(body)
  })
