/**
 * The jail's seccomp filter, handed to bwrap as a compiled classic-BPF program (`--seccomp FD`). Built
 * here, instruction by instruction, because bwrap takes only the compiled form and libseccomp is not
 * a dependency we want in the server.
 *
 * What it refuses, and why:
 * - `add_key`, `request_key`, `keyctl` (EPERM): the kernel's key rings are per user, not per namespace.
 *   Under root every jail runs as the same uid (64000), so one thread's command could leave a key in
 *   that uid's user key ring and another thread's command read it later: a channel between threads
 *   that outlives the run (found by a review, 2026-12-05), and a quota one thread could use up.
 * - `unshare` and `clone` with CLONE_NEWUSER (EPERM): a new user namespace gives its creator every
 *   capability inside it, and with them the kernel's namespaced attack surface (mounts, nested bwrap).
 *   The jail promises no capabilities.
 * - `clone3` (ENOSYS): its flags are behind a pointer the filter cannot read, so it is refused as
 *   unknown; the C library then falls back to `clone`, which the filter can read (Docker does the same).
 * - `memfd_create`, `memfd_secret` and `shmget` (ENOSYS, "not here", so programs fall back to files):
 *   their pages are host memory that neither RLIMIT_AS nor the bounded /tmp counts, so a command could
 *   hold any amount of it (found by a review, 2026-12-05).
 * - any other system-call ABI (i386 through `int 0x80`, x32 on x86_64; 32-bit ARM on arm64) (EPERM):
 *   its numbers differ, so a filter on the native numbers would not hold there.
 *
 * Only x86_64 and arm64 have a filter; on another architecture the jail runs without one (README).
 */

/** `struct seccomp_data`: where the filter reads the system call's number, its ABI and its first argument. */
const NR = 0
const ARCH = 4
const ARG0_LOW = 16 // little-endian: the low 32 bits of args[0]

const AUDIT_ARCH_X86_64 = 0xc000003e
const AUDIT_ARCH_AARCH64 = 0xc00000b7
const X32_SYSCALL_BIT = 0x40000000
const CLONE_NEWUSER = 0x10000000

const RET_ALLOW = 0x7fff0000
const RET_ERRNO = 0x00050000
const EPERM = 1
const ENOSYS = 38

interface Numbers {
  readonly arch: number
  readonly addKey: number
  readonly requestKey: number
  readonly keyctl: number
  readonly unshare: number
  readonly clone: number
  readonly clone3: number
  readonly memfdCreate: number
  readonly memfdSecret: number
  readonly shmget: number
  /** x86_64 only: numbers at or above this are the x32 ABI's. */
  readonly abiBit?: number
}

const numbersOf: Partial<Record<NodeJS.Architecture, Numbers>> = {
  x64: {
    arch: AUDIT_ARCH_X86_64,
    addKey: 248,
    requestKey: 249,
    keyctl: 250,
    unshare: 272,
    clone: 56,
    clone3: 435,
    memfdCreate: 319,
    memfdSecret: 447,
    shmget: 29,
    abiBit: X32_SYSCALL_BIT
  },
  arm64: {
    arch: AUDIT_ARCH_AARCH64,
    addKey: 217,
    requestKey: 218,
    keyctl: 219,
    unshare: 97,
    clone: 220,
    clone3: 435,
    memfdCreate: 279,
    memfdSecret: 447,
    shmget: 194
  }
}

type Target = string | "next"
type Instruction =
  | { readonly label: string }
  | { readonly op: "ld"; readonly k: number }
  | { readonly op: "jeq" | "jge" | "jset"; readonly k: number; readonly jt: Target; readonly jf: Target }
  | { readonly op: "ret"; readonly k: number }

const codes = { ld: 0x20, jeq: 0x15, jge: 0x35, jset: 0x45, ret: 0x06 } as const

/** Encodes the program as `struct sock_filter[]` (u16 code, u8 jt, u8 jf, u32 k; little-endian). */
const assemble = (program: ReadonlyArray<Instruction>): Buffer => {
  const labels = new Map<string, number>()
  const body: Array<Exclude<Instruction, { readonly label: string }>> = []
  for (const instruction of program) {
    if ("label" in instruction) labels.set(instruction.label, body.length)
    else body.push(instruction)
  }
  const out = Buffer.alloc(body.length * 8)
  body.forEach((instruction, index) => {
    const offset = (target: Target) => {
      if (target === "next") return 0
      const distance = labels.get(target)! - index - 1
      if (!(distance >= 0 && distance <= 255)) throw new Error(`seccomp: jump to ${target} out of range`)
      return distance
    }
    out.writeUInt16LE(codes[instruction.op], index * 8)
    out.writeUInt8(instruction.op === "ld" || instruction.op === "ret" ? 0 : offset(instruction.jt), index * 8 + 2)
    out.writeUInt8(instruction.op === "ld" || instruction.op === "ret" ? 0 : offset(instruction.jf), index * 8 + 3)
    out.writeUInt32LE(instruction.k >>> 0, index * 8 + 4)
  })
  return out
}

/** The program for an architecture's numbers. */
export const programFor = (n: Numbers): Buffer =>
  assemble([
    { op: "ld", k: ARCH },
    { op: "jeq", k: n.arch, jt: "next", jf: "deny" },
    { op: "ld", k: NR },
    ...(n.abiBit === undefined ? [] : [{ op: "jge" as const, k: n.abiBit, jt: "deny", jf: "next" }]),
    { op: "jeq", k: n.addKey, jt: "deny", jf: "next" },
    { op: "jeq", k: n.requestKey, jt: "deny", jf: "next" },
    { op: "jeq", k: n.keyctl, jt: "deny", jf: "next" },
    { op: "jeq", k: n.clone3, jt: "nosys", jf: "next" },
    { op: "jeq", k: n.memfdCreate, jt: "nosys", jf: "next" },
    { op: "jeq", k: n.memfdSecret, jt: "nosys", jf: "next" },
    { op: "jeq", k: n.shmget, jt: "nosys", jf: "next" },
    { op: "jeq", k: n.unshare, jt: "flags", jf: "next" },
    { op: "jeq", k: n.clone, jt: "flags", jf: "next" },
    { op: "ret", k: RET_ALLOW },
    { label: "flags" },
    { op: "ld", k: ARG0_LOW },
    { op: "jset", k: CLONE_NEWUSER, jt: "deny", jf: "next" },
    { op: "ret", k: RET_ALLOW },
    { label: "deny" },
    { op: "ret", k: RET_ERRNO | EPERM },
    { label: "nosys" },
    { op: "ret", k: RET_ERRNO | ENOSYS }
  ])

/** This machine's filter, or undefined on an architecture without one. */
export const filter: Buffer | undefined = (() => {
  const numbers = numbersOf[process.arch]
  return numbers === undefined ? undefined : programFor(numbers)
})()

/** The descriptor bwrap reads the filter from. */
export const SECCOMP_FD = 5
