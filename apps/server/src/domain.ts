/**
 * The domain `main.ts` serves. Swap this one export to serve another domain (the agents domain
 * replaces the example accounts here).
 */
export { domain } from "./AgentsDomain.js"
