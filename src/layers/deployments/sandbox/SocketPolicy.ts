/**
 * The socket rules of one deployment (spec §2.7: "only PORT can be bound; binding another port or
 * a UDP socket fails with EPERM; outbound connections are unaffected"; no access to the
 * cluster-internal network), as eBPF programs the kernel runs on the deployment's cgroup:
 *
 * - sock_create: an inet socket other than a TCP stream (UDP, ICMP, SCTP, MPTCP) is refused.
 * - bind4/bind6: a bind to any port but PORT is refused (port 0, the "any port" bind, included).
 * - connect4/connect6: a connection into a refused range is refused unless an allowance names
 *   that address and port (the resolver on 53, the gateway's public port on a single node).
 *   IPv4-mapped IPv6 destinations (::ffff:a.b.c.d) get the IPv4 rules.
 *
 * Every refusal is the kernel's EPERM (a cgroup socket program answering 0). Pure: bytes out,
 * loaded and attached by the small C helper portico-sandbox-bpf.c. Instruction encoding: struct
 * bpf_insn (code u8, dst:4|src:4, off s16, imm s32), little-endian hosts only (x86-64, arm64).
 */
import { isIPv4, isIPv6 } from "node:net"

/** Hook numbers as the helper reads them. */
export const Hook = { sockCreate: 1, bind4: 2, bind6: 3, connect4: 4, connect6: 5 } as const

export interface Cidr {
  readonly address: string
  readonly prefix: number
}

export interface Allowance extends Cidr {
  readonly port: number
}

export interface SocketRules {
  readonly port: number
  readonly refuse: ReadonlyArray<Cidr>
  readonly allow: ReadonlyArray<Allowance>
}

/**
 * The cluster-internal and host-local networks a deployment may not dial: loopback (the
 * gateway's and engines' ports, other apps), private and carrier-grade NAT ranges (the cluster's
 * mesh and the cloud's metadata and internal services), link-local, unspecified, multicast and
 * their IPv6 counterparts. Public destinations stay reachable.
 */
export const internalRanges: ReadonlyArray<Cidr> = [
  cidr("0.0.0.0/8"),
  cidr("10.0.0.0/8"),
  cidr("100.64.0.0/10"),
  cidr("127.0.0.0/8"),
  cidr("169.254.0.0/16"),
  cidr("172.16.0.0/12"),
  cidr("192.168.0.0/16"),
  cidr("224.0.0.0/3"),
  cidr("::/127"),
  cidr("fc00::/7"),
  cidr("fe80::/10"),
  cidr("fec0::/10"),
  cidr("ff00::/8"),
  cidr("64:ff9b::/96"),
  cidr("2002::/16")
]

export function cidr(text: string): Cidr {
  const [address = "", prefixText] = text.split("/")
  const max = isIPv4(address) ? 32 : isIPv6(address) ? 128 : -1
  if (max < 0) throw new Error(`not an IP address: ${text}`)
  const prefix = prefixText === undefined ? max : Number(prefixText)
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > max) throw new Error(`bad prefix: ${text}`)
  return { address, prefix }
}

/** The address as 4 (IPv4) or 16 (IPv6) bytes in network order. */
export function addressBytes(address: string): Uint8Array {
  if (isIPv4(address)) return Uint8Array.from(address.split(".").map(Number))
  if (!isIPv6(address)) throw new Error(`not an IP address: ${address}`)
  let text = address
  const v4Tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (v4Tail) {
    const b = addressBytes(v4Tail[1]!)
    text = text.slice(0, -v4Tail[1]!.length) + `${((b[0]! << 8) | b[1]!).toString(16)}:${((b[2]! << 8) | b[3]!).toString(16)}`
  }
  const [head = "", tail] = text.split("::")
  const groups = (s: string) => (s === "" ? [] : s.split(":").map((g) => parseInt(g, 16)))
  const h = groups(head)
  const t = tail === undefined ? [] : groups(tail)
  const words = [...h, ...Array<number>(8 - h.length - t.length).fill(0), ...t]
  const out = new Uint8Array(16)
  words.forEach((w, i) => {
    out[2 * i] = w >> 8
    out[2 * i + 1] = w & 0xff
  })
  return out
}

// --- instruction building -------------------------------------------------------------------

type Target = "allow" | "refuse" | number // a number is a label index resolved at assembly
interface Insn {
  readonly code: number
  readonly dst: number
  readonly src: number
  readonly off: number
  readonly imm: number
  /** Jumps only: where to, resolved to `off` at assembly. */
  readonly to?: Target
}

const ldxw = (dst: number, src: number, off: number): Insn => ({ code: 0x61, dst, src, off, imm: 0 })
const mov = (dst: number, imm: number): Insn => ({ code: 0xb7, dst, src: 0, off: 0, imm })
const and32 = (dst: number, imm: number): Insn => ({ code: 0x54, dst, src: 0, off: 0, imm: imm | 0 })
const jeq32 = (dst: number, imm: number, to: Target): Insn => ({ code: 0x16, dst, src: 0, off: 0, imm: imm | 0, to })
const jne32 = (dst: number, imm: number, to: Target): Insn => ({ code: 0x56, dst, src: 0, off: 0, imm: imm | 0, to })
const ja = (to: Target): Insn => ({ code: 0x05, dst: 0, src: 0, off: 0, imm: 0, to })
const exit: Insn = { code: 0x95, dst: 0, src: 0, off: 0, imm: 0 }

/** 4 bytes in network order as the u32 a little-endian load of them gives. */
const word = (b: Uint8Array, at: number): number => (b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16) | (b[at + 3]! << 24)) | 0
/** A port as the u32 load of the context's user_port (network order in the low 16 bits) gives. */
const portWord = (port: number): number => ((port & 0xff) << 8) | (port >> 8)

function maskBytes(prefix: number, length: number): Uint8Array {
  const m = new Uint8Array(length)
  for (let i = 0; i < length; i++) m[i] = prefix >= 8 * (i + 1) ? 0xff : prefix <= 8 * i ? 0 : (0xff << (8 - (prefix - 8 * i))) & 0xff
  return m
}

/** Program body ending in the shared allow/refuse exits; labels are indexes into `labels`. */
class Program {
  readonly insns: Array<Insn> = []
  readonly labels: Array<number> = []
  label(): number {
    this.labels.push(-1)
    return this.labels.length - 1
  }
  place(label: number) {
    this.labels[label] = this.insns.length
  }
  push(...i: Array<Insn>) {
    this.insns.push(...i)
  }
  /** Falls through on no match; jumps to `to` when the address at ctx word offsets matches. */
  matchAddress(bytes: Uint8Array, prefix: number, firstOffset: number, to: Target) {
    const mask = maskBytes(prefix, bytes.length)
    const next = this.label()
    const words = Math.ceil(prefix / 32)
    for (let w = 0; w < words; w++) {
      this.push(ldxw(2, 1, firstOffset + 4 * w), and32(2, word(mask, 4 * w)))
      this.push(w === words - 1 ? jeq32(2, word(bytes, 4 * w) & word(mask, 4 * w), to) : jne32(2, word(bytes, 4 * w) & word(mask, 4 * w), next))
    }
    if (words === 0) this.push(ja(to)) // /0: always
    this.place(next)
  }
  assemble(): Uint8Array {
    const allowAt = this.insns.length
    const all = [...this.insns, mov(0, 1), exit, mov(0, 0), exit]
    const refuseAt = allowAt + 2
    const out = new Uint8Array(all.length * 8)
    const view = new DataView(out.buffer)
    all.forEach((insn, i) => {
      const to = insn.to
      const target = to === undefined ? null : to === "allow" ? allowAt : to === "refuse" ? refuseAt : this.labels[to]!
      const off = target === null ? insn.off : target - i - 1
      view.setUint8(i * 8, insn.code)
      view.setUint8(i * 8 + 1, (insn.src << 4) | insn.dst)
      view.setInt16(i * 8 + 2, off, true)
      view.setInt32(i * 8 + 4, insn.imm, true)
    })
    return out
  }
}

// Offsets in struct bpf_sock_addr and struct bpf_sock (include/uapi/linux/bpf.h).
const SA_USER_IP4 = 4
const SA_USER_IP6 = 8
const SA_USER_PORT = 24
const SK_TYPE = 8
const SK_PROTOCOL = 12
const SOCK_STREAM = 1
const IPPROTO_TCP = 6

function sockCreate(): Uint8Array {
  const p = new Program()
  p.push(ldxw(2, 1, SK_TYPE), jne32(2, SOCK_STREAM, "refuse"))
  p.push(ldxw(2, 1, SK_PROTOCOL), jne32(2, IPPROTO_TCP, "refuse"))
  p.push(ja("allow"))
  return p.assemble()
}

function bind(port: number): Uint8Array {
  const p = new Program()
  p.push(ldxw(2, 1, SA_USER_PORT), jne32(2, portWord(port), "refuse"))
  p.push(ja("allow"))
  return p.assemble()
}

/** IPv4 rules, or the same rules over IPv4-mapped IPv6 addresses (::ffff:0:0/96 + v4). */
const mapped = (c: Cidr): Cidr => ({ address: `::ffff:${c.address}`, prefix: 96 + c.prefix })

function connect(rules: SocketRules, family: 4 | 6): Uint8Array {
  const p = new Program()
  const pick = <T extends Cidr>(list: ReadonlyArray<T>): Array<T> =>
    list.flatMap((c) => (isIPv4(c.address) ? (family === 4 ? [c] : [{ ...c, ...mapped(c) }]) : family === 6 ? [c] : []))
  const at = family === 4 ? SA_USER_IP4 : SA_USER_IP6
  for (const a of pick(rules.allow)) {
    const next = p.label()
    p.push(ldxw(2, 1, SA_USER_PORT), jne32(2, portWord(a.port), next))
    p.matchAddress(addressBytes(a.address), a.prefix, at, "allow")
    p.place(next)
  }
  for (const r of pick(rules.refuse)) p.matchAddress(addressBytes(r.address), r.prefix, at, "refuse")
  p.push(ja("allow"))
  return p.assemble()
}

/** The record stream portico-sandbox-bpf reads: per hook, u32 hook, u32 count, instructions. */
export function socketPrograms(rules: SocketRules): Uint8Array {
  if (!Number.isInteger(rules.port) || rules.port < 1 || rules.port > 65535) throw new Error(`bad port ${rules.port}`)
  const programs: Array<[number, Uint8Array]> = [
    [Hook.sockCreate, sockCreate()],
    [Hook.bind4, bind(rules.port)],
    [Hook.bind6, bind(rules.port)],
    [Hook.connect4, connect(rules, 4)],
    [Hook.connect6, connect(rules, 6)]
  ]
  const parts = programs.flatMap(([hook, insns]) => {
    const head = new Uint8Array(8)
    new DataView(head.buffer).setUint32(0, hook, true)
    new DataView(head.buffer).setUint32(4, insns.length / 8, true)
    return [head, insns]
  })
  const out = new Uint8Array(parts.reduce((n, b) => n + b.length, 0))
  let at = 0
  for (const b of parts) {
    out.set(b, at)
    at += b.length
  }
  return out
}
