/**
 * The API token the operator typed, kept in sessionStorage (gone when the tab closes), sent as
 * `Authorization: Bearer` on every API call and on the event stream.
 */
const key = "orchestration.apiToken"

export const readToken = (): string | undefined => sessionStorage.getItem(key) ?? undefined

export const saveToken = (token: string) => sessionStorage.setItem(key, token)

export const clearToken = () => sessionStorage.removeItem(key)

export const authorization = (): string | undefined => {
  const token = readToken()
  return token === undefined ? undefined : `Bearer ${token}`
}
