/** The server process serving the domain named in `domain.ts` (see ServerProcess.ts). */
import { domain } from "./domain.js"
import * as ServerProcess from "./ServerProcess.js"

ServerProcess.run(domain)
