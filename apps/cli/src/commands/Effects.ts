/**
 * `orchestrator effects list|show|retry|cancel|release|fail`: the outbox through the server's operator routes.
 * Retry and cancel are commands with receipts: the answer names the command id, and repeating the
 * same action on the row as it was is answered from its receipt (duplicate), never done twice. An
 * action the effect's state refuses (409 EffectActionRefused) is not stored: once the state allows
 * it, the same command succeeds.
 * Release and fail act on a quarantined effect (its aggregate could not record its settlement):
 * release records the parked settlement once the cause is fixed; fail ends it failed with the
 * operator's reason, without telling the aggregate.
 */
import { Args, Command, Options } from "@effect/cli"
import type { Api } from "@orchestration/server"
import * as Render from "../Render.js"
import * as ServerClient from "../ServerClient.js"
import { optional, serverCommand, whenSome } from "../ServerCommand.js"

type EffectView = typeof Api.EffectView.Type
type DispatchAnswer = typeof Api.DispatchAnswer.Type

const statuses = ["pending", "running", "succeeded", "failed", "cancelled", "quarantined"] as const

export const renderEffects = (effects: ReadonlyArray<EffectView>): string =>
  effects.length === 0
    ? "no effects"
    : Render.table(
        ["EFFECT", "KIND", "STATUS", "ATTEMPTS", "AGGREGATE", "UPDATED"],
        effects.map((e) => [
          e.effectId,
          e.kind,
          e.status,
          String(e.attempts),
          `${e.aggregateType}/${e.aggregateId}`,
          Render.time(e.updatedAt)
        ])
      )

export const renderEffect = (e: EffectView): string =>
  Render.fields([
    ["effect", e.effectId],
    ["kind", e.kind],
    ["status", e.status],
    ["attempts", String(e.attempts)],
    ["aggregate", `${e.aggregateType}/${e.aggregateId}`],
    ["decided by", e.commandId],
    ["lane", e.lane],
    ["available at", Render.time(e.availableAt)],
    ["lease", e.leaseOwner === null ? "-" : `${e.leaseOwner} until ${Render.time(e.leaseExpiresAt)}`],
    ["created", Render.time(e.createdAt)],
    ["updated", Render.time(e.updatedAt)],
    ["payload", e.undecodable === undefined ? Render.compact(e.payload, 400) : `unreadable: ${e.undecodable}`],
    ["response", Render.compact(e.response, 400)],
    ["error", Render.compact(e.error, 400)],
    ...(e.quarantineUnreadable !== undefined
      ? [["quarantine", `unreadable: ${e.quarantineUnreadable}`] as [string, string]]
      : e.quarantine === null
        ? []
        : [
            [
              "quarantine",
              `${e.quarantine.reason} (by ${e.quarantine.by} at ${Render.time(e.quarantine.at)}): ${Render.compact(e.quarantine.message, 400)}`
            ] as [string, string]
          ])
  ])

export const renderAnswer = (action: string, answer: DispatchAnswer): string =>
  [
    Render.fields([
      [action, answer.duplicate ? "already done: answered from its receipt (duplicate)" : "accepted"],
      ["command", answer.commandId],
      ["aggregate", `${answer.aggregateType}/${answer.aggregateId}`],
      ["sequence", String(answer.sequence)],
      ["events", answer.events.map((e) => `${e.sequence} ${e.type}`).join(", ") || "-"]
    ]),
    `receipt: orchestrator receipts show '${answer.commandId}'`
  ].join("\n")

const list = serverCommand(
  "list",
  {
    status: optional(Options.choice("status", statuses), "Only effects in this status."),
    kind: optional(Options.text("kind"), "Only effects of this kind (e.g. tool.execute, model.step)."),
    thread: optional(Options.text("thread"), "Only effects owned by this thread (its aggregate id)."),
    limit: Options.integer("limit").pipe(
      Options.withDescription("At most this many rows, oldest first (1-1000)."),
      Options.withDefault(100)
    )
  },
  {
    ask: (api, options) =>
      api.effects.list({
        urlParams: {
          ...whenSome(options.status, "status"),
          ...whenSome(options.kind, "kind"),
          ...whenSome(options.thread, "aggregateId"),
          limit: options.limit
        }
      }),
    render: (a) => renderEffects(a.effects),
    description: "List outbox effects, oldest first (GET /v1/effects)."
  }
)

const effectId = Args.text({ name: "effectId" }).pipe(
  Args.withDescription("The effect's id, as `effects list` shows it.")
)

const show = serverCommand(
  "show",
  { effectId },
  {
    ask: (api, options) => api.effects.get({ path: { effectId: ServerClient.segment(options.effectId) } }),
    render: renderEffect,
    description: "Show one effect: status, attempts, lease, payload, response, error (GET /v1/effects/:id)."
  }
)

const commandIdOption = Options.text("command-id").pipe(
  Options.withDescription(
    "The operator command's id; the same id with the same action is one action, whatever the effect did since. " +
      "Default: operator:<action>:<effectId>#<attempts>.<operatorActions>, read from the effect, so repeating it before the effect changes is a duplicate."
  ),
  Options.optional
)

const operate = (action: "retry" | "cancel", description: string) =>
  serverCommand(
    action,
    { effectId, commandId: commandIdOption },
    {
      ask: (api, options) => {
        const request = {
          path: { effectId: ServerClient.segment(options.effectId) },
          payload: whenSome(options.commandId, "commandId")
        }
        return action === "retry" ? api.effects.retry(request) : api.effects.cancel(request)
      },
      render: (a) => renderAnswer(action, a),
      description
    }
  )

const release = serverCommand(
  "release",
  { effectId },
  {
    ask: (api, options) => api.effects.release({ path: { effectId: ServerClient.segment(options.effectId) } }),
    render: (a) => renderAnswer("release", a),
    description:
      "Record a quarantined effect's parked settlement now that its cause is fixed (POST /v1/effects/:id/release). Exit 7 when it is not quarantined or the cause is still there."
  }
)

const fail = serverCommand(
  "fail",
  {
    effectId,
    reason: Options.text("reason").pipe(
      Options.withDescription("Why the operator ends it (stored on the effect; 1-500 characters).")
    )
  },
  {
    ask: (api, options) =>
      api.effects.fail({
        path: { effectId: ServerClient.segment(options.effectId) },
        payload: { reason: options.reason }
      }),
    render: renderEffect,
    description:
      "End a quarantined effect as failed with your reason; its aggregate is not told (POST /v1/effects/:id/fail). Exit 7 when it is not quarantined."
  }
)

export const effects = Command.make("effects").pipe(
  Command.withDescription("Outbox effects: list, show, retry, cancel, and release or fail a quarantined one."),
  Command.withSubcommands([
    list,
    show,
    operate(
      "retry",
      "Send a failed or cancelled effect back to be performed (POST /v1/effects/:id/retry). Exit 7 when its state refuses it: " +
        "not failed or cancelled, a cancelled performance not stopped yet, or a process-bound effect that may have taken effect."
    ),
    operate(
      "cancel",
      "Cancel a pending or running effect (POST /v1/effects/:id/cancel). Exit 7 when it is already settled."
    ),
    release,
    fail
  ])
)
