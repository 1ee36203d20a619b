/**
 * The outbox at a glance: rows by status × kind, how long the oldest due row has waited, each
 * reactor's lag, quarantined rows (release or fail), and the newest failures with their reason,
 * attempts and a retry button.
 */
import type { ComponentChildren } from "preact"
import type { EffectRow, OutboxSummary } from "../api.js"
import { errorReason, formatAge, formatCount, quarantineReason } from "../format.js"
import { StatusBadge } from "./Badges.js"
import { EffectActions } from "./EffectActions.js"
import { num, Table } from "./Table.js"

const statuses = ["pending", "running", "succeeded", "failed", "cancelled", "quarantined"] as const
/** Counts that need someone's attention are shown in red. */
const alarming = new Set<string>(["failed", "quarantined"])

export interface OutboxPanelProps {
  readonly summary: OutboxSummary | undefined
  readonly onOpenThread: (threadId: string) => void
  readonly onChanged: () => void
  readonly onError: (error: unknown) => void
}

/** A quarantined or failed effect: status, kind, owner, attempts and actions, then its id and why. */
const EffectItem = (props: {
  readonly effect: EffectRow
  readonly testId: string
  readonly owner: ComponentChildren
  readonly attempts: ComponentChildren
  readonly reasonTestId: string
  readonly reason: ComponentChildren
  readonly onChanged: () => void
  readonly onError: (error: unknown) => void
}) => (
  <li data-testid={props.testId} data-effect-id={props.effect.effectId}>
    <div class="failure-head">
      <StatusBadge status={props.effect.status} />
      <span class="mono">{props.effect.kind}</span>
      {props.owner}
      <span class="muted small">{props.attempts}</span>
      <EffectActions effect={props.effect} onDone={props.onChanged} onError={props.onError} />
    </div>
    <div class="mono small effect-id">{props.effect.effectId}</div>
    <div class="reason" data-testid={props.reasonTestId}>
      {props.reason}
    </div>
  </li>
)

export const OutboxPanel = ({ onChanged, onError, onOpenThread, summary }: OutboxPanelProps) => {
  const kinds = [...new Set((summary?.rows ?? []).map((r) => r.kind))].sort()
  const count = (status: string, kind?: string) =>
    (summary?.rows ?? [])
      .filter((r) => r.status === status && (kind === undefined || r.kind === kind))
      .reduce((a, r) => a + r.count, 0)
  return (
    <section class="panel" data-testid="outbox">
      <header class="panel-head">
        <h2>Outbox</h2>
        <span class="muted" data-testid="oldest-pending">
          oldest due pending:{" "}
          <strong>
            {summary === undefined
              ? "–"
              : summary.oldestPendingAgeMs === 0
                ? "none waiting"
                : formatAge(summary.oldestPendingAgeMs)}
          </strong>
        </span>
      </header>
      <Table compact columns={["Kind", ...statuses.map(num)]} empty={kinds.length === 0 ? "no effects yet" : undefined}>
        {kinds.map((kind) => (
          <tr data-testid="outbox-kind" data-kind={kind}>
            <td class="mono">{kind}</td>
            {statuses.map((s) => {
              const n = count(s, kind)
              return (
                <td class={n > 0 && alarming.has(s) ? "num bad" : n === 0 ? "num zero" : "num"} data-status={s}>
                  {formatCount(n)}
                </td>
              )
            })}
          </tr>
        ))}
        {kinds.length > 1 ? (
          <tr class="total">
            <td>all kinds</td>
            {statuses.map((s) => (
              <td class="num">{formatCount(count(s))}</td>
            ))}
          </tr>
        ) : null}
      </Table>
      <h3>Reactors</h3>
      <Table compact columns={["Reactor", num("Lag (due, unsettled)"), num("Oldest due pending")]}>
        {(summary?.reactors ?? []).map((r) => (
          <tr data-testid="reactor">
            <td class="mono">{r.name}</td>
            <td class="num">{formatCount(r.lag)}</td>
            <td class="num">{r.oldestPendingAgeMs === 0 ? "–" : formatAge(r.oldestPendingAgeMs)}</td>
          </tr>
        ))}
      </Table>
      {(summary?.quarantined ?? []).length === 0 ? null : (
        <>
          <h3>
            Quarantined effects{" "}
            <span class="muted small">
              (their owner cannot record the outcome: fix the cause, then release; or fail with a reason)
            </span>
          </h3>
          <ul class="failures" data-testid="quarantined">
            {summary!.quarantined!.map((effect: EffectRow) => (
              <EffectItem
                key={effect.effectId}
                effect={effect}
                testId="quarantined-effect"
                owner={
                  <span class="mono">
                    {effect.aggregateType}/{effect.aggregateId}
                  </span>
                }
                attempts={<>attempt {effect.attempts}</>}
                reasonTestId="quarantine-reason"
                reason={quarantineReason(effect)}
                onChanged={onChanged}
                onError={onError}
              />
            ))}
          </ul>
        </>
      )}
      <h3>
        Failed effects{" "}
        <span class="muted small">
          (newest {summary?.recentFailures.length ?? 0} of {formatCount(count("failed"))})
        </span>
      </h3>
      {summary === undefined || summary.recentFailures.length === 0 ? (
        <p class="empty" data-testid="no-failures">
          no failed effects
        </p>
      ) : (
        <ul class="failures">
          {summary.recentFailures.map((effect: EffectRow) => (
            <EffectItem
              key={effect.effectId}
              effect={effect}
              testId="failure"
              owner={
                <a
                  href={`#/threads/${encodeURIComponent(effect.aggregateId)}`}
                  class="mono"
                  onClick={(e) => {
                    e.preventDefault()
                    onOpenThread(effect.aggregateId)
                  }}
                >
                  {effect.aggregateId}
                </a>
              }
              attempts={<>attempts {effect.attempts}</>}
              reasonTestId="failure-reason"
              reason={errorReason(effect.error)}
              onChanged={onChanged}
              onError={onError}
            />
          ))}
        </ul>
      )}
    </section>
  )
}
