/** What the SQL benchmark's targets and its driver agree on: schemas, statements, rows. */

/** Rows in `users`; the point read asks for `pointId`. */
export const USERS = 1000
export const pointId = 42

export const usersSchema = "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, age INTEGER)"
export const eventsSchema = "CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT, at INTEGER)"
export const pointRead = "SELECT id, name, age FROM users WHERE id = ?"
export const insertUser = "INSERT INTO users (id, name, age) VALUES (?, ?, ?)"
export const insertEvent = "INSERT INTO events (kind, at) VALUES (?, ?)"
export const eventArgs: readonly [string, number] = ["click", 1_700_000_000]

/** Row `id` of `users`, the same wherever the table is filled. */
export const userRow = (id: number): readonly [number, string, number] => [id, `user-${id}`, 18 + (id % 60)]

/** The bare server's only accepted credential. */
export const bareAuthorization = "Bearer bench"
