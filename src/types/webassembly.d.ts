/**
 * The part of the WebAssembly JavaScript API the function runner uses. Node 20 has all of it;
 * its type package declares none (the ES lib does not either), and the DOM lib would bring a
 * browser's globals into every module.
 */
declare namespace WebAssembly {
  class Module {
    constructor(bytes: BufferSource)
    static imports(module: Module): Array<{ module: string; name: string; kind: string }>
    static exports(module: Module): Array<{ name: string; kind: string }>
  }
  class Instance {
    constructor(module: Module, imports?: Imports)
    readonly exports: Record<string, unknown>
  }
  class Memory {
    constructor(descriptor: { initial: number; maximum?: number })
    readonly buffer: ArrayBuffer
    grow(delta: number): number
  }
  type ImportValue = ((...args: Array<never>) => unknown) | Memory
  type ModuleImports = Record<string, ImportValue>
  type Imports = Record<string, ModuleImports>
  function compile(bytes: BufferSource): Promise<Module>
  function validate(bytes: BufferSource): boolean
  class CompileError extends Error {}
  class LinkError extends Error {}
  class RuntimeError extends Error {}
}
type BufferSource = ArrayBufferView | ArrayBuffer
