/** `make` run once per object: later calls with the same object get the first answer. */
export const oncePerObject = <K extends object, V>(make: (key: K) => V): ((key: K) => V) => {
  const made = new WeakMap<K, V>()
  return (key) => {
    let value = made.get(key)
    if (value === undefined) {
      value = make(key)
      made.set(key, value)
    }
    return value
  }
}
