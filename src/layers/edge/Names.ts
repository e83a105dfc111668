/** A DNS name as the edge's modules compare it: lowercase, without the root's trailing dot. */
export const canonicalName = (name: string): string => name.toLowerCase().replace(/\.$/, "")
