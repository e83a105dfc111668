/**
 * Request-body bytes in flight, per client network (the rate limiter's notion: IPv4 /24, IPv6
 * /64) and for the whole process. A body being received holds memory (a JSON body is read whole
 * before it is parsed; a streamed one holds at most its read-ahead), so a client that opens many
 * requests and never finishes their bodies must run out of room before the gateway runs out of
 * memory. Bytes are reserved when the headers arrive, before any of the body is read, and given
 * back when the body is done with or its connection is gone.
 *
 * A body that does not fit is still admitted when its network has nothing else in flight (and,
 * for the process cap, when nothing at all is in flight): a cap below one body's size then
 * serialises such bodies instead of refusing them for ever.
 */

export type BudgetRefusal = "network" | "process"

export interface BodyBudgetLimits {
  readonly perNetworkBytes: number
  readonly perProcessBytes: number
}

export class BodyBudget {
  private readonly byNetwork = new Map<string, number>()
  private total = 0

  constructor(readonly limits: BodyBudgetLimits) {}

  /** Bytes in flight now, for the whole process or one network. */
  inFlight(network?: string): number {
    return network === undefined ? this.total : (this.byNetwork.get(network) ?? 0)
  }

  /**
   * Reserves `bytes` for a body from `network` (undefined: a node-to-node call, charged to the
   * process only), or says which cap refuses it, reserving nothing.
   */
  reserve(network: string | undefined, bytes: number): BudgetRefusal | undefined {
    const mine = network === undefined ? 0 : (this.byNetwork.get(network) ?? 0)
    if (network !== undefined && mine > 0 && mine + bytes > this.limits.perNetworkBytes) return "network"
    if (this.total > 0 && this.total + bytes > this.limits.perProcessBytes) return "process"
    if (network !== undefined) this.byNetwork.set(network, mine + bytes)
    this.total += bytes
    return undefined
  }

  /** Gives back what `reserve` took (a network's entry goes when it holds nothing). */
  release(network: string | undefined, bytes: number): void {
    this.total = Math.max(0, this.total - bytes)
    if (network === undefined) return
    const left = (this.byNetwork.get(network) ?? 0) - bytes
    if (left > 0) this.byNetwork.set(network, left)
    else this.byNetwork.delete(network)
  }
}
