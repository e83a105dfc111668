/**
 * A static site's content types, by file extension. A table rather than a dependency: a site
 * needs a few dozen types, the answer must not change under us with a library's update, and an
 * unknown extension is `application/octet-stream` (with `nosniff`, a browser then downloads it
 * rather than guessing it is HTML).
 */

const TEXT = "; charset=utf-8"

const TYPES: ReadonlyMap<string, string> = new Map([
  ["html", "text/html" + TEXT],
  ["htm", "text/html" + TEXT],
  ["css", "text/css" + TEXT],
  ["js", "text/javascript" + TEXT],
  ["mjs", "text/javascript" + TEXT],
  ["cjs", "text/javascript" + TEXT],
  ["json", "application/json" + TEXT],
  ["map", "application/json" + TEXT],
  ["webmanifest", "application/manifest+json" + TEXT],
  ["xml", "application/xml" + TEXT],
  ["rss", "application/rss+xml" + TEXT],
  ["atom", "application/atom+xml" + TEXT],
  ["txt", "text/plain" + TEXT],
  ["md", "text/markdown" + TEXT],
  ["csv", "text/csv" + TEXT],
  ["ics", "text/calendar" + TEXT],
  ["vtt", "text/vtt" + TEXT],
  ["svg", "image/svg+xml"],
  ["png", "image/png"],
  ["jpg", "image/jpeg"],
  ["jpeg", "image/jpeg"],
  ["gif", "image/gif"],
  ["webp", "image/webp"],
  ["avif", "image/avif"],
  ["ico", "image/x-icon"],
  ["bmp", "image/bmp"],
  ["woff", "font/woff"],
  ["woff2", "font/woff2"],
  ["ttf", "font/ttf"],
  ["otf", "font/otf"],
  ["eot", "application/vnd.ms-fontobject"],
  ["wasm", "application/wasm"],
  ["pdf", "application/pdf"],
  ["zip", "application/zip"],
  ["gz", "application/gzip"],
  ["mp3", "audio/mpeg"],
  ["ogg", "audio/ogg"],
  ["wav", "audio/wav"],
  ["m4a", "audio/mp4"],
  ["mp4", "video/mp4"],
  ["webm", "video/webm"],
  ["ogv", "video/ogg"],
  ["mov", "video/quicktime"]
])

/** The content type of a site file by its path's extension (case-insensitive). */
export const contentTypeOf = (filePath: string): string => {
  const slash = filePath.lastIndexOf("/")
  const dot = filePath.lastIndexOf(".")
  if (dot <= slash + 1) return "application/octet-stream"
  return TYPES.get(filePath.slice(dot + 1).toLowerCase()) ?? "application/octet-stream"
}
