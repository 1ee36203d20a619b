#!/usr/bin/env node
/**
 * The `orchestrator` binary. Runs the command tree and turns the outcome into the documented exit
 * code (CliErrors.outcomeOf, the one place): Ctrl-C / SIGTERM interrupt the command and end with 0.
 */
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import { cli } from "./Cli.js"
import { outcomeOf } from "./CliErrors.js"

NodeRuntime.runMain(cli(process.argv).pipe(Effect.provide(NodeContext.layer)), {
  disableErrorReporting: true,
  disablePrettyLogger: true,
  teardown: (exit, onExit) => {
    const outcome = outcomeOf(exit)
    if (outcome.message !== undefined) process.stderr.write(`${outcome.message}\n`)
    onExit(outcome.code)
  }
})
