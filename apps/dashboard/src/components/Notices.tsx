/** The page's notices: the last error (until dismissed) and each degraded component. */
import type { ComponentHealth } from "../api.js"

export interface NoticesProps {
  readonly notice: string | undefined
  readonly onDismiss: () => void
  readonly components: ReadonlyArray<ComponentHealth>
}

export const Notices = (props: NoticesProps) => (
  <>
    {props.notice === undefined ? null : (
      <div class="notice" role="alert" data-testid="notice">
        {props.notice}
        <button type="button" class="link" onClick={props.onDismiss}>
          dismiss
        </button>
      </div>
    )}

    {props.components
      .filter((c) => c.status !== "ok")
      .map((c) => (
        <div class="notice" role="status" data-testid="component-degraded" data-component={c.name} key={c.name}>
          {c.name} is degraded: {c.message}
        </div>
      ))}
  </>
)
