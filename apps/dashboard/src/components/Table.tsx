/**
 * The dashboard's tables: a heading row from the column names, then the rows, or one cell across the
 * table that says why there are none (loading, nothing yet).
 */
import type { ComponentChildren } from "preact"

/** A column's heading; `num` right-aligns it over its numbers. */
export type Column = string | { readonly label: string; readonly num: true }

export const num = (label: string): Column => ({ label, num: true })

export interface TableProps {
  readonly columns: ReadonlyArray<Column>
  readonly compact?: boolean
  /** Shown across the table instead of the rows when set. */
  readonly empty?: string | undefined
  readonly children?: ComponentChildren
}

export const Table = (props: TableProps) => (
  <table class={props.compact ? "table compact" : "table"}>
    <thead>
      <tr>
        {props.columns.map((column) =>
          typeof column === "string" ? <th>{column}</th> : <th class="num">{column.label}</th>
        )}
      </tr>
    </thead>
    <tbody>
      {props.empty === undefined ? (
        props.children
      ) : (
        <tr>
          <td colSpan={props.columns.length} class="empty">
            {props.empty}
          </td>
        </tr>
      )}
    </tbody>
  </table>
)
