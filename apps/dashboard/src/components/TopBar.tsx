/** The page's top bar: the stuck threshold, the event stream's state, and the stored token. */
import type { StreamState } from "../eventStream.js"
import { readToken } from "../token.js"

export interface TopBarProps {
  readonly stuckSeconds: number
  readonly onStuckSeconds: (seconds: number) => void
  readonly needToken: boolean
  readonly stream: StreamState
  readonly onForgetToken: () => void
}

export const TopBar = (props: TopBarProps) => (
  <header class="top">
    <a class="brand" href="#/">
      Orchestration <span>dashboard</span>
    </a>
    <div class="top-right">
      <label class="setting" title="A running turn whose thread has had no event for this long is flagged stuck">
        stuck after
        <input
          type="number"
          min="1"
          step="1"
          value={props.stuckSeconds}
          data-testid="stuck-after"
          onInput={(e) => {
            const value = Number((e.target as HTMLInputElement).value)
            if (Number.isFinite(value) && value > 0) props.onStuckSeconds(value)
          }}
        />
        s
      </label>
      <span class={`pill pill-${props.needToken ? "unauthorized" : props.stream}`} data-testid="stream-state">
        {props.needToken ? "token needed" : props.stream === "live" ? "● live" : props.stream}
      </span>
      {readToken() !== undefined ? (
        <button type="button" class="link" onClick={props.onForgetToken}>
          forget token
        </button>
      ) : null}
    </div>
  </header>
)
