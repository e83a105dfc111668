/**
 * A stand-in for Expo's push API on 127.0.0.1: `POST /--/api/v2/push/send` with one message or a
 * JSON array of at most 100 (`to` a token or an array of tokens), answered `{data: [ticket]}` with
 * one ticket per recipient in order: `{status: "ok", id}`, or for tokens the test marks (and
 * tokens not of the `ExponentPushToken[...]`/`ExpoPushToken[...]` form)
 * `{status: "error", message, details: {error: "DeviceNotRegistered"}}`. With `accessToken` set it
 * requires `Authorization: Bearer <it>` as a project with enhanced push security does; request
 * errors are `{errors: [{code, message}]}`. It records every message and can stall or fail
 * requests.
 */
import * as crypto from "node:crypto"
import * as http from "node:http"
import { listenOnLoopback } from "./process.js"

export interface ExpoReceived {
  readonly to: string
  readonly message: Readonly<Record<string, unknown>>
  readonly authorization: string | undefined
}

export interface ExpoStandIn {
  /** `http://127.0.0.1:<port>`, the base a client appends `/--/api/v2/push/send` to. */
  readonly url: string
  readonly received: Array<ExpoReceived>
  /** How many send requests arrived. */
  readonly requests: () => number
  readonly markUnregistered: (token: string) => void
  /** Every later request hangs (`"stall"`) or is answered with this status; undefined resets. */
  readonly failRequests: (mode: number | "stall" | undefined) => void
  readonly stop: () => Promise<void>
}

const EXPO_TOKEN = /^Expo(nent)?PushToken\[[^\]]+\]$/

export const startExpoStandIn = async (options: { readonly accessToken?: string } = {}): Promise<ExpoStandIn> => {
  const received: Array<ExpoReceived> = []
  const gone = new Set<string>()
  let failing: number | "stall" | undefined
  let requests = 0

  const answer = (response: http.ServerResponse, status: number, body: unknown) => {
    response.writeHead(status, { "content-type": "application/json" })
    response.end(JSON.stringify(body))
  }
  const refuse = (response: http.ServerResponse, status: number, code: string, message: string) =>
    answer(response, status, { errors: [{ code, message }] })

  const server = http.createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      if (request.url !== "/--/api/v2/push/send") return refuse(response, 404, "NOT_FOUND", "not found")
      if (request.method !== "POST") return refuse(response, 405, "METHOD_NOT_ALLOWED", "use POST")
      requests += 1
      if (failing === "stall") return
      if (failing !== undefined) return refuse(response, failing, "INTERNAL_SERVER_ERROR", "the push service failed")
      const authorization = request.headers["authorization"]
      if (options.accessToken !== undefined && authorization !== "Bearer " + options.accessToken) {
        return refuse(response, 401, "UNAUTHORIZED", "the bearer token is invalid; check the access token you are using")
      }
      let parsed: unknown
      try {
        parsed = JSON.parse(Buffer.concat(chunks).toString("utf8"))
      } catch {
        return refuse(response, 400, "VALIDATION_ERROR", "the request body is not JSON")
      }
      const messages = Array.isArray(parsed) ? parsed : [parsed]
      if (messages.length > 100) return refuse(response, 400, "PUSH_TOO_MANY_NOTIFICATIONS", "at most 100 notifications per request")
      const tickets: Array<unknown> = []
      for (const message of messages) {
        if (typeof message !== "object" || message === null) return refuse(response, 400, "VALIDATION_ERROR", "a message is not an object")
        const to: unknown = (message as Record<string, unknown>)["to"]
        const recipients = Array.isArray(to) ? to : [to]
        for (const recipient of recipients) {
          if (typeof recipient !== "string") return refuse(response, 400, "VALIDATION_ERROR", "\"to\" must be a string or an array")
          received.push({ to: recipient, message: message as Record<string, unknown>, authorization })
          if (gone.has(recipient) || !EXPO_TOKEN.test(recipient)) {
            const why = EXPO_TOKEN.test(recipient) ? "is not a registered push notification recipient" : "is not a valid Expo push token"
            tickets.push({ status: "error", message: `"${recipient}" ${why}`, details: { error: "DeviceNotRegistered", expoPushToken: recipient } })
          } else {
            tickets.push({ status: "ok", id: crypto.randomUUID() })
          }
        }
      }
      answer(response, 200, { data: tickets })
    })
  })

  const port = await listenOnLoopback(server)
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    requests: () => requests,
    markUnregistered: (token) => gone.add(token),
    failRequests: (mode) => {
      failing = mode
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
