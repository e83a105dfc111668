/** Polls `check` until it holds; fails naming `what` when `timeoutMs` pass first. */
export const waitFor = async (what: string, check: () => Promise<boolean> | boolean, timeoutMs = 30_000, everyMs = 100): Promise<void> => {
  const until = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, everyMs))
  }
}
