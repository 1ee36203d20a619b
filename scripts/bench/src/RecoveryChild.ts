/** Child process of Recovery.ts: fills `dir` with `rows` dead running rows, reconciles, restarts; reports JSON. */
import { runRecovery } from "./Recovery.js"

const [dir, rows] = process.argv.slice(2)
if (dir === undefined || rows === undefined) throw new Error("usage: RecoveryChild <dir> <rows>")
process.stdout.write(`${JSON.stringify(await runRecovery(dir, Number(rows)))}\n`)
