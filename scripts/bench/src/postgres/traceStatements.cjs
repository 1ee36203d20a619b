// A preload that records, for every statement node-postgres sends, its connection, when it was sent and
// when its reply reached its callback (docs/benchmarks-postgres.md, "End to end at 16 and at 64 clients").
// Usage, from scripts/bench: TRACEQ_OUT=/tmp/trace.json node -r ./src/postgres/traceStatements.cjs \
//   dist/src/postgres/Child.js e2e '{…}'. The JSON holds { c, t0, t1, q } per statement (ms, q cut at 60).
const { writeFileSync } = require("node:fs")
const pg = require(require.resolve("pg", { paths: [process.cwd()] }))

const out = []
let connections = 0
const query = pg.Client.prototype.query
pg.Client.prototype.query = function (...args) {
  if (this.__traceId === undefined) this.__traceId = ++connections
  const config = args[0]
  const text = typeof config === "string" ? config : (config?.text ?? "")
  const record = { c: this.__traceId, t0: performance.now(), q: text.replace(/\s+/g, " ").slice(0, 60) }
  out.push(record)
  const answered = () => {
    record.t1 = performance.now()
  }
  const last = args.length - 1
  if (typeof args[last] === "function") {
    const callback = args[last]
    args[last] = (...results) => {
      answered()
      return callback(...results)
    }
  } else if (typeof config?.callback === "function") {
    const callback = config.callback
    config.callback = (...results) => {
      answered()
      return callback(...results)
    }
  }
  const result = query.apply(this, args)
  if (typeof result?.then === "function") result.then(answered, answered)
  return result
}

process.on("exit", () => writeFileSync(process.env.TRACEQ_OUT ?? "/tmp/traceq.json", JSON.stringify(out)))
