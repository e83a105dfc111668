/**
 * The Redis engine's Lua scripts (RedisPubSubEngine.ts). Each runs atomically in Redis, so the
 * offset a message gets, its place in history and its PUBLISH are one step: every subscriber on
 * every gateway sees one order per topic. Presence events go through the same `publish` function,
 * so they are numbered and kept like messages.
 *
 * A history entry is `<Redis time in µs> <frame>`.
 *
 * Every script takes the same first keys and arguments (`TOPIC_KEYS`, `TOPIC_ARGS`): the topic's
 * state hash (`seq`, `epoch`), its history list, and, for presence, its entries hash
 * (connection → `<member id>\n<member JSON>`), expiry sorted set (connection → Unix ms) and member
 * counts hash (member id → open connections).
 */

/** KEYS[1..5]: state, history, entries, expiries, counts. */
export const TOPIC_KEYS = 5

/**
 * ARGV[1..8]: channel, the topic as JSON, timestamp (ms), history size, history age (ms), an epoch
 * to start with when the topic has none, the state's lifetime (ms), the presence keys' lifetime (ms).
 */
export const TOPIC_ARGS = 8

const prelude = `
local state, history, entries, expiries, counts = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local channel, topicJson, ts = ARGV[1], ARGV[2], ARGV[3]
local size, maxAge, candidate, stateTtl, presenceTtl = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8])

local function publish(content)
  redis.call('HSETNX', state, 'epoch', candidate)
  local epoch = redis.call('HGET', state, 'epoch')
  local offset = redis.call('HINCRBY', state, 'seq', 1)
  redis.call('PEXPIRE', state, stateTtl)
  local frame = '{"topic":' .. topicJson .. ',"offset":' .. offset .. ',"epoch":"' .. epoch .. '","timestamp":' .. ts .. ',' .. content .. '}'
  if size > 0 and maxAge > 0 then
    -- kept with Redis's own time, so gateways' clocks do not decide what has aged out
    local now = redis.call('TIME')
    redis.call('RPUSH', history, now[1] .. string.format('%06d', tonumber(now[2])) .. ' ' .. frame)
    redis.call('LTRIM', history, -size, -1)
    redis.call('PEXPIRE', history, maxAge)
  end
  redis.call('PUBLISH', channel, offset .. ' ' .. epoch .. ' ' .. frame)
  return {offset, epoch}
end

local function keepPresence()
  for _, key in ipairs({entries, expiries, counts}) do
    if redis.call('EXISTS', key) == 1 then redis.call('PEXPIRE', key, presenceTtl) end
  end
end

local function leave(connection)
  local stored = redis.call('HGET', entries, connection)
  if not stored then return 0 end
  redis.call('HDEL', entries, connection)
  redis.call('ZREM', expiries, connection)
  local cut = string.find(stored, '\\n', 1, true)
  local member = string.sub(stored, 1, cut - 1)
  local left = redis.call('HINCRBY', counts, member, -1)
  if left <= 0 then
    redis.call('HDEL', counts, member)
    publish('"type":"presence","event":"leave","member":' .. string.sub(stored, cut + 1))
  end
  return 1
end
`

/** ARGV[9]: the content (the frame's members after its position). Answers {offset, epoch}. */
export const publishScript = `${prelude}
return publish(ARGV[9])
`

/**
 * ARGV[9..12]: connection, member id, member JSON, expiry (Unix ms). A member's first connection
 * publishes its join; the same connection joining again only moves its expiry.
 */
export const joinScript = `${prelude}
local connection, member, memberJson, expiresAt = ARGV[9], ARGV[10], ARGV[11], ARGV[12]
if redis.call('HEXISTS', entries, connection) == 1 then
  redis.call('ZADD', expiries, expiresAt, connection)
  keepPresence()
  return 0
end
redis.call('HSET', entries, connection, member .. '\\n' .. memberJson)
redis.call('ZADD', expiries, expiresAt, connection)
local open = redis.call('HINCRBY', counts, member, 1)
keepPresence()
if open == 1 then publish('"type":"presence","event":"join","member":' .. memberJson) end
return 1
`

/** ARGV[9]: connection. The member's last connection publishes its leave. */
export const leaveScript = `${prelude}
return leave(ARGV[9])
`

/** ARGV[9]: now (Unix ms). Every entry expired by then leaves, with its leave event; answers how many. */
export const reapScript = `${prelude}
local gone = redis.call('ZRANGEBYSCORE', expiries, '-inf', ARGV[9])
for _, connection in ipairs(gone) do
  if leave(connection) == 0 then redis.call('ZREM', expiries, connection) end
end
return #gone
`
