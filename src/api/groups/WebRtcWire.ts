/**
 * Rooms' wire shapes (docs/webrtc.md, "Rooms" and "Events"): what `GET /v1/webrtc/rooms` answers,
 * what nodes ask each other's media servers (`/v1/internal/webrtc/*`), and the participant event a
 * media server reports. Client-safe: no server code is imported.
 */
import { Schema } from "effect"
import { NamespaceName } from "../../domain/Names.js"
import { strict } from "../Wire.js"

export const ROOM_RULE = "1-64 of A-Z a-z 0-9 _ . -"
export const RoomName = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_.-]{1,64}$/)).annotations({ description: `a room: ${ROOM_RULE}` })
const Id = Schema.String.pipe(Schema.maxLength(256))

export const Participant = Schema.Struct({
  peer_id: Schema.String,
  user: Schema.String.annotations({ description: "the credential's subject: a wallet, or a deployment's workload" }),
  device: Schema.String.annotations({ description: "the session's device, or empty" }),
  muted: Schema.Boolean,
  joined_at: Schema.Number.annotations({ description: "Unix ms" })
}).annotations({ identifier: "WebRtcParticipant" })

export const NodeRoom = Schema.Struct({ room: Schema.String, participants: Schema.Array(Participant) })

export const Room = Schema.Struct({
  room: Schema.String,
  node: Schema.String.annotations({ description: "the node whose media server hosts the room" }),
  participants: Schema.Array(Participant)
}).annotations({ identifier: "WebRtcRoom" })

export const RoomsAnswer = Schema.Struct({
  namespace: Schema.String,
  rooms: Schema.Array(Room).annotations({ description: "rooms with a participant, on every node, sorted by name" }),
  unreachable: Schema.Array(Schema.String).annotations({ description: "nodes whose media server did not answer: their rooms are missing" })
}).annotations({ identifier: "WebRtcRooms" })

export const SignalQuery = strict(
  Schema.Struct({
    room: RoomName,
    jwt: Schema.optional(Schema.String.annotations({ description: "the access token, for clients that cannot set Authorization on a handshake (browsers); never logged" }))
  })
)

/** A node's media server, as another node asks it. */
export const MediaHealth = Schema.Struct({ rooms: Schema.Int, peers: Schema.Int })
export const NodeRoomsOrder = strict(Schema.Struct({ namespace: NamespaceName }))
export const NodeRoomsAnswer = Schema.Struct({ rooms: Schema.Array(NodeRoom) })

/** `end` closes every peer of the namespace, in every room (room, user and peer empty). */
export const CONTROL_ACTIONS = ["kick", "mute", "unmute", "end"] as const
export const ControlOrder = strict(
  Schema.Struct({
    namespace: NamespaceName,
    room: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_.-]{0,64}$/)),
    user: Id,
    peer: Id,
    action: Schema.Literal(...CONTROL_ACTIONS)
  })
)
export const ControlAnswer = Schema.Struct({ affected: Schema.Int })

/** Who a gateway sends to another node's media server: the internal signal route's envelope. */
export const JoinEnvelope = strict(
  Schema.Struct({
    namespace: NamespaceName,
    room: RoomName,
    user: Id,
    device: Id,
    peer: Id,
    muted: Schema.Boolean
  })
)

/** A participant joining or leaving, as the media server reports it (MAC'd, docs/webrtc.md "Events"). */
export const ParticipantEvent = strict(
  Schema.Struct({
    namespace: NamespaceName,
    room: RoomName,
    event: Schema.Literal("join", "leave"),
    peer_id: Id,
    user: Id,
    device: Id,
    node: Id,
    at: Schema.Number,
    nonce: Schema.String.pipe(Schema.pattern(/^[0-9a-f]{32}$/)),
    reason: Schema.Literal("", "left", "kicked", "failed")
  })
).annotations({ identifier: "WebRtcParticipantEvent" })

export const EventAccepted = Schema.Struct({ published: Schema.Boolean })
