/** Asks for the API token when the server answered 401; the token is kept for this tab only. */
import { useState } from "preact/hooks"

export const TokenPrompt = ({
  onSubmit,
  refused
}: {
  readonly refused: boolean
  readonly onSubmit: (token: string) => void
}) => {
  const [value, setValue] = useState("")
  return (
    <div class="overlay">
      <form
        class="token-form"
        data-testid="token-prompt"
        onSubmit={(e) => {
          e.preventDefault()
          if (value.trim() !== "") onSubmit(value.trim())
        }}
      >
        <h2>API token</h2>
        <p>
          This server has <code>API_TOKEN</code> set. Enter it to read the API and send operator commands; it is kept in
          this tab only (sessionStorage).
        </p>
        {refused ? (
          <p class="bad" data-testid="token-refused">
            The server refused that token.
          </p>
        ) : null}
        <input
          type="password"
          autoFocus
          autocomplete="off"
          placeholder="API token"
          data-testid="token-input"
          value={value}
          onInput={(e) => setValue((e.target as HTMLInputElement).value)}
        />
        <button type="submit" data-testid="token-submit">
          Connect
        </button>
      </form>
    </div>
  )
}
