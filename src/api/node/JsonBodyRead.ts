import type * as http from "node:http"
import { refuseOversize } from "./DirectAnswers.js"

/**
 * Reads a JSON body whole within its cap and hands it on, or refuses it (413) once it passes the
 * cap. A class with bound methods rather than closures per request: tsx, which `npm start`
 * runs, names every closure it compiles with a property definition, a cost paid per request.
 */
export class JsonBodyRead {
  private chunks: Array<Buffer> = []
  private size = 0
  /** Set once the body is served or refused: an error after that is no longer this reader's. */
  private settled = false
  private readonly onData = this.data.bind(this)
  private readonly onEnd = this.end.bind(this)

  constructor(
    private readonly req: http.IncomingMessage,
    private readonly res: http.ServerResponse,
    private readonly cap: number,
    private readonly capBody: string,
    private readonly startedAt: number,
    private readonly serve: (req: http.IncomingMessage, res: http.ServerResponse, cap: number, capBody: string, body: Buffer | undefined, startedAt: number) => void,
    private readonly answeredHere: (req: http.IncomingMessage, status: number, startedAt: number) => void
  ) {
    // `on`, not `once`: each fires once at most anyway, and `once` wraps every listener again
    req.on("data", this.onData)
    req.on("end", this.onEnd)
    // a client gone before the end of its body gets no answer (logged as 499, as nginx does); the
    // error must not go unhandled
    const gone = this.gone.bind(this)
    req.on("error", gone)
    // the connection closed, or the body was cut (src/api/BodyGuard.ts) and answered there
    res.on("close", gone)
  }

  private data(chunk: Buffer): void {
    this.size += chunk.length
    if (this.size <= this.cap) {
      this.chunks.push(chunk)
      return
    }
    this.settled = true
    this.chunks = []
    this.req.off("data", this.onData)
    this.req.off("end", this.onEnd)
    refuseOversize(this.req, this.res, this.capBody, this.cap)
    this.answeredHere(this.req, 413, this.startedAt)
  }

  private end(): void {
    this.settled = true
    const body = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks, this.size)
    this.chunks = []
    this.serve(this.req, this.res, this.cap, this.capBody, body, this.startedAt)
  }

  /** The body will not be served: what was read of it is dropped now, not when the request is collected. */
  private gone(): void {
    this.req.off("end", this.onEnd)
    this.req.off("data", this.onData)
    this.chunks = []
    if (this.settled) return
    this.settled = true
    // an answer already out was logged by whoever gave it
    if (!this.res.headersSent) this.answeredHere(this.req, 499, this.startedAt)
  }
}

/** A request that carries a body. */
export const hasBody = (req: http.IncomingMessage): boolean => {
  const length = req.headers["content-length"]
  return !((length === undefined || length === "0") && req.headers["transfer-encoding"] === undefined)
}
