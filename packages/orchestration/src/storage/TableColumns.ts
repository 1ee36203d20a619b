/**
 * How a table module states the columns the commit path inserts, so every writer builds its
 * statement from the one list: the generic path (`sql.insert` over any SqlClient), the SQLite writer
 * (positional `?` on the raw connection) and the PostgreSQL writer (`unnest` of typed arrays). A
 * column takes a value encoded from the row, a constant the statement writes, or the value of
 * another column of the same row (a new outbox row's `updated_at` is its `created_at`).
 */
export type Value = string | number | null

export type InsertColumn<Row> =
  | {
      readonly name: string
      /** The logical type: TEXT, or a 64-bit integer (SQLite INTEGER, PostgreSQL BIGINT). */
      readonly type: "text" | "int"
      readonly encode: (row: Row) => Value
    }
  | { readonly name: string; readonly constant: string | number }
  | { readonly name: string; readonly sameAs: string }

/** `schema_version` → `schemaVersion`: the row field a column is read from unless the shape says otherwise. */
type FieldOf<Column extends string> = Column extends `${infer Head}_${infer Tail}`
  ? `${Head}${Capitalize<FieldOf<Tail>>}`
  : Column

/** The logical type of a field's values: strings are TEXT, numbers 64-bit integers (either may be null). */
type LogicalType<V> = [V] extends [string | null] ? "text" : [V] extends [number | null] ? "int" : never

/**
 * A column in `insertShape`: its logical type alone when its value is the row field its name spells in
 * camelCase (checked against the row type), or the column stated in full (an encoder, a constant, `sameAs`).
 */
export type ColumnSpec<Row, Column extends string> =
  | (FieldOf<Column> extends keyof Row ? LogicalType<Row[FieldOf<Column>]> : never)
  | { readonly type: "text" | "int"; readonly encode: (row: Row) => Value }
  | { readonly constant: string | number }
  | { readonly sameAs: string }

const fieldOf = (column: string) => column.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase())

/**
 * A table's insert shape from a record of column → spec, in statement order (a record keeps its keys'
 * order): `insertShape<NewEvent>()("events", { event_id: "text", payload: { type: "text", encode: (e) => e.payloadJson } })`.
 */
export const insertShape =
  <Row>() =>
  <const Spec extends { readonly [Column in keyof Spec & string]: ColumnSpec<Row, Column> }>(
    table: string,
    spec: Spec,
    options: { readonly keepExistingOn?: string } = {}
  ): InsertShape<Row> => ({
    table,
    columns: Object.entries<ColumnSpec<Row, string>>(spec).map(([name, column]) => {
      if (typeof column !== "string") return { name, ...column }
      const field = fieldOf(name) as keyof Row
      return { name, type: column, encode: (row: Row) => row[field] as Value }
    }),
    ...options
  })

export interface InsertShape<Row> {
  readonly table: string
  readonly columns: ReadonlyArray<InsertColumn<Row>>
  /** A row whose value in this unique column exists is left as it is (`ON CONFLICT (…) DO NOTHING`). */
  readonly keepExistingOn?: string
}

/** A column bound from the row: its name, logical type and encoder, in the shape's order. */
export interface Bound<Row> {
  readonly name: string
  readonly type: "text" | "int"
  readonly encode: (row: Row) => Value
}

/** The columns whose values come from the row, each once (`sameAs` columns reuse another's). */
export const bound = <Row>(shape: InsertShape<Row>): ReadonlyArray<Bound<Row>> =>
  shape.columns.flatMap((c) => ("encode" in c ? [c] : []))

const boundNamed = <Row>(shape: InsertShape<Row>, name: string): Bound<Row> => {
  const column = bound(shape).find((c) => c.name === name)
  if (column === undefined) throw new Error(`${shape.table}.${name} is not a bound column`)
  return column
}

/**
 * Each column's source: `{ bound: i }` (the i-th bound value, from 0) or `{ literal }` (SQL text).
 * The writers render these as `?`, `$n` or an unnest column.
 */
export const sources = <Row>(
  shape: InsertShape<Row>
): ReadonlyArray<{ readonly bound: number } | { readonly literal: string }> => {
  const order = bound(shape).map((c) => c.name)
  return shape.columns.map((c) => {
    if ("constant" in c) return { literal: literal(c.constant) }
    const name = "sameAs" in c ? boundNamed(shape, c.sameAs).name : c.name
    return { bound: order.indexOf(name) }
  })
}

/** A constant as SQL text (the shapes' constants are the engine's own, never client input). */
export const literal = (value: string | number) =>
  typeof value === "number" ? String(value) : `'${value.replaceAll("'", "''")}'`

export const names = <Row>(shape: InsertShape<Row>) => shape.columns.map((c) => c.name)

/** The `ON CONFLICT` clause of the shape, or "". */
export const conflictClause = <Row>(shape: InsertShape<Row>) =>
  shape.keepExistingOn === undefined ? "" : ` ON CONFLICT (${shape.keepExistingOn}) DO NOTHING`

/** A row as a record of column → value, for `sql.insert` (the generic path). */
export const toRecord = <Row>(shape: InsertShape<Row>, row: Row): Record<string, Value> => {
  const record: Record<string, Value> = {}
  for (const c of shape.columns) {
    if ("constant" in c) record[c.name] = c.constant
    else if ("sameAs" in c) record[c.name] = boundNamed(shape, c.sameAs).encode(row)
    else record[c.name] = c.encode(row)
  }
  return record
}
