/**
 * Retry (failed, cancelled) and cancel (pending, running) for one effect row, through the API; for a
 * quarantined row, release (record its parked settlement) and fail (with the operator's reason).
 */
import { useState } from "preact/hooks"
import { ApiError, type EffectRow, failQuarantined, operate, releaseQuarantined } from "../api.js"

export interface EffectActionsProps {
  readonly effect: Pick<EffectRow, "effectId" | "status">
  /** Called after the server accepted the command, to re-read what changed. */
  readonly onDone: () => void
  readonly onError: (error: unknown) => void
}

type Action = "retry" | "cancel" | "release" | "fail"

export const EffectActions = ({ effect, onDone, onError }: EffectActionsProps) => {
  const [busy, setBusy] = useState(false)
  const run = (action: Action) => {
    if (action === "cancel" && !window.confirm(`Cancel effect ${effect.effectId}?`)) return
    const reason =
      action === "fail" ? window.prompt(`Why fail effect ${effect.effectId}? (its owner is not told)`) : undefined
    if (action === "fail" && (reason === null || reason === undefined || reason.trim() === "")) return
    setBusy(true)
    const sent =
      action === "release"
        ? releaseQuarantined(effect.effectId)
        : action === "fail"
          ? failQuarantined(effect.effectId, reason!.trim().slice(0, 500))
          : operate(action, effect.effectId)
    sent
      .then(onDone, (error: unknown) => {
        // A click the effect's state refuses (the row moved on, a cancelled run not stopped yet, a
        // process-bound call already answered) is a 409 naming why: re-read (which clears the
        // notice), then show why, so the reason stays on the page.
        onDone()
        onError(error instanceof ApiError ? new Error(`${action} refused: ${error.message}`) : error)
      })
      .finally(() => setBusy(false))
  }
  const canRetry = effect.status === "failed" || effect.status === "cancelled"
  const canCancel = effect.status === "pending" || effect.status === "running"
  const quarantined = effect.status === "quarantined"
  // In this order, each shown only when the row's status allows it.
  const buttons: ReadonlyArray<readonly [Action, string, boolean, boolean]> = [
    ["release", "Release", quarantined, false],
    ["fail", "Fail", quarantined, true],
    ["retry", "Retry", canRetry, false],
    ["cancel", "Cancel", canCancel, true]
  ]
  return (
    <span class="actions">
      {buttons.map(([action, label, shown, danger]) =>
        shown ? (
          <button
            type="button"
            class={danger ? "danger" : undefined}
            data-testid={action}
            disabled={busy}
            onClick={() => run(action)}
          >
            {label}
          </button>
        ) : null
      )}
    </span>
  )
}
