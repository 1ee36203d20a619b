/** Status badges: one colour per status, used for threads, turns and effects alike. */
export const StatusBadge = ({ status, testId }: { readonly status: string; readonly testId?: string }) => (
  <span class={`badge badge-${status}`} data-testid={testId}>
    {status}
  </span>
)

export const StuckBadge = ({ forMs, format }: { readonly forMs: number; readonly format: (ms: number) => string }) => (
  <span class="badge badge-stuck" data-testid="stuck" title="no event from this thread for longer than the stuck limit">
    {`stuck ${format(forMs)}`}
  </span>
)
