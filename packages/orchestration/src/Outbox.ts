/**
 * The `outbox` table: effect rows (reactor cursors are ReactorCursors.ts, heartbeats Owners.ts). Rows are written in
 * the commit transaction of the command that decided them; everything after that (claim, lease
 * renewal, hand-back) is a conditional UPDATE here, and settling goes through the front door. Effect
 * ids are deterministic, so writing the same intent twice leaves one row.
 */
import { SqlError } from "@effect/sql/SqlError"
import { SqlClient } from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
import { Effect } from "effect"
import * as StoredJson from "./StoredJson.js"
import type { RowChange, SettlementTarget } from "./EffectOutcomes.js"
import { QuarantineRecord } from "./QuarantineRecord.js"
import { LOST_RACE_CODE } from "./storage/StorageErrors.js"
import { StoreBackend, type StoreBackendShape } from "./storage/StoreBackend.js"
import * as TableColumns from "./storage/TableColumns.js"

/** `quarantined`: its owning aggregate could not record its settlement; parked for an operator (Quarantine.ts). */
export type OutboxStatus = "pending" | "running" | "succeeded" | "failed" | "cancelled" | "quarantined"

export interface NewOutboxRow {
  readonly effectId: string
  readonly commandId: string
  readonly aggregateType: string
  readonly aggregateId: string
  readonly kind: string
  readonly payloadJson: string
  readonly lane: string
  readonly availableAt: number
  readonly now: number
}

/** A row as reactors, operators and tests see it. */
export interface OutboxRow {
  readonly sequence: number
  readonly effectId: string
  readonly commandId: string
  readonly aggregateType: string
  readonly aggregateId: string
  readonly kind: string
  readonly payload: unknown
  readonly lane: string
  readonly status: OutboxStatus
  readonly attempts: number
  readonly availableAt: number
  readonly leaseOwner: string | null
  readonly leaseExpiresAt: number | null
  readonly response: unknown
  readonly error: unknown
  /** Operator actions (retry, cancel) applied to this row so far. */
  readonly operatorActions: number
  readonly createdAt: number
  readonly updatedAt: number
  /** Why the row was last parked (kept after a release or an operator's fail, for the record). */
  readonly quarantine: QuarantineRecord | null
  /**
   * Set when the stored quarantine record is not JSON, or not of a record's shape: `quarantine` is then
   * null and the status is kept. Its parked settlement is lost with it, so such a row can be failed but
   * not released.
   */
  readonly quarantineUnreadable?: string
  /**
   * Set when the stored payload is not JSON (cut off, or edited by hand): `payload` is then null. A
   * reactor never hands such a row to its handler; it fails it for good (Reactor.verdictFor).
   */
  readonly undecodable?: string
}

interface Row {
  readonly sequence: number
  readonly effect_id: string
  readonly command_id: string
  readonly aggregate_type: string
  readonly aggregate_id: string
  readonly kind: string
  readonly payload: string
  readonly lane: string
  readonly status: OutboxStatus
  readonly attempts: number
  readonly available_at: number
  readonly lease_owner: string | null
  readonly lease_expires_at: number | null
  readonly response: string | null
  readonly error: string | null
  readonly operator_actions: number
  readonly created_at: number
  readonly updated_at: number
  readonly quarantine: string | null
}

/** Every column of `outbox`, in the migrated schema's order (test/table-columns.test.ts holds the two together). */
export const columns = [
  "sequence",
  "effect_id",
  "command_id",
  "aggregate_type",
  "aggregate_id",
  "kind",
  "payload",
  "lane",
  "status",
  "attempts",
  "available_at",
  "lease_owner",
  "lease_expires_at",
  "response",
  "error",
  "created_at",
  "updated_at",
  "quarantine",
  "operator_actions"
] as const satisfies ReadonlyArray<keyof Row>

/**
 * What the commit writes for a decided effect: a pending row, not attempted yet. An effect id that
 * exists already keeps its row (deterministic ids make a repeated intent one row).
 */
export const insertShape = TableColumns.insertShape<NewOutboxRow>()(
  "outbox",
  {
    effect_id: "text",
    command_id: "text",
    aggregate_type: "text",
    aggregate_id: "text",
    kind: "text",
    payload: { type: "text", encode: (r) => r.payloadJson },
    lane: "text",
    status: { constant: "pending" },
    attempts: { constant: 0 },
    available_at: "int",
    created_at: { type: "int", encode: (r) => r.now },
    updated_at: { sameAs: "created_at" }
  },
  { keepExistingOn: "effect_id" }
)

/**
 * A stored outcome or failure as written, or its text when it is not JSON: a row is read whatever its
 * columns hold. A read that threw here would stop the reader (a reactor's claim, an operator's list)
 * at one damaged row, and leave the rows claimed with it running under a live owner.
 */
const parseOrText = (json: string | null): unknown => {
  if (json === null) return null
  const read = StoredJson.read(json, "value")
  return read.ok ? read.value : json
}

/** The payload, or why it cannot be read. */
const payloadOf = (json: string): { readonly payload: unknown; readonly undecodable?: string } => {
  const read = StoredJson.read(json, "payload")
  return read.ok ? { payload: read.value } : { payload: null, undecodable: read.why }
}

const readQuarantine = StoredJson.reader(QuarantineRecord, "quarantine record")

/**
 * The quarantine record, or why it cannot be read: of another shape counts as unreadable, since a
 * release dispatches its settlement and every view renders its fields.
 */
const quarantineOf = (
  json: string | null
): { readonly quarantine: QuarantineRecord | null; readonly quarantineUnreadable?: string } => {
  if (json === null) return { quarantine: null }
  const read = readQuarantine(json)
  return read.ok ? { quarantine: read.value } : { quarantine: null, quarantineUnreadable: read.why }
}

const toRow = (r: Row): OutboxRow => ({
  sequence: Number(r.sequence),
  effectId: r.effect_id,
  commandId: r.command_id,
  aggregateType: r.aggregate_type,
  aggregateId: r.aggregate_id,
  kind: r.kind,
  ...payloadOf(r.payload),
  lane: r.lane,
  status: r.status,
  attempts: Number(r.attempts),
  availableAt: Number(r.available_at),
  leaseOwner: r.lease_owner,
  leaseExpiresAt: r.lease_expires_at === null ? null : Number(r.lease_expires_at),
  response: parseOrText(r.response),
  error: parseOrText(r.error),
  operatorActions: Number(r.operator_actions ?? 0),
  createdAt: Number(r.created_at),
  updatedAt: Number(r.updated_at),
  ...quarantineOf(r.quarantine ?? null)
})

export const insert = (rows: ReadonlyArray<NewOutboxRow>) =>
  Effect.gen(function* () {
    if (rows.length === 0) return
    const sql = yield* SqlClient
    yield* sql`INSERT INTO outbox ${sql.insert(rows.map((r) => TableColumns.toRecord(insertShape, r)))}${sql.literal(
      TableColumns.conflictClause(insertShape)
    )}`
  })

export const find = (effectId: string) =>
  Effect.flatMap(SqlClient, (sql) => sql<Row>`SELECT * FROM outbox WHERE effect_id = ${effectId}`).pipe(
    Effect.map((rows) => (rows[0] === undefined ? undefined : toRow(rows[0])))
  )

/**
 * `find` for a decision in a dispatch batch: on a shared store the row is share-locked to the end of
 * the transaction, so a settlement of another process waits for it (a stream chunk decided on a
 * running row then commits before the row is seen settled, never after: ReadSide's chunk follower
 * ends on the first settled status it reads) and a change decided on it is not undone under it.
 */
export const findForDecision = (effectId: string) =>
  Effect.flatMap(
    Effect.zip(SqlClient, StoreBackend),
    ([sql, backend]) =>
      sql<Row>`SELECT * FROM outbox WHERE effect_id = ${effectId} ${sql.literal(backend.lockForShare)}`
  ).pipe(Effect.map((rows) => (rows[0] === undefined ? undefined : toRow(rows[0]))))

export const toTarget = (row: OutboxRow, leaseHolder?: SettlementTarget["leaseHolder"]): SettlementTarget => ({
  effectId: row.effectId,
  kind: row.kind,
  aggregateType: row.aggregateType,
  aggregateId: row.aggregateId,
  status: row.status,
  attempts: row.attempts,
  payload: row.payload,
  error: row.error,
  leaseOwner: row.leaseOwner,
  leaseExpiresAt: row.leaseExpiresAt,
  leaseHolder,
  operatorActions: row.operatorActions
})

/**
 * The rows of these effects, by effect id (a settlement page's read), locked as `findForDecision`'s,
 * in effect id order so two batches that lock overlapping pages take their locks in one order.
 */
export const findMany = (effectIds: ReadonlyArray<string>) =>
  Effect.flatMap(
    Effect.zip(SqlClient, StoreBackend),
    ([sql, backend]) =>
      sql<Row>`SELECT * FROM outbox WHERE ${sql.in("effect_id", effectIds)}${sql.literal(
        backend.lockForShare === "" ? "" : ` ORDER BY effect_id ${backend.lockForShare}`
      )}`
  ).pipe(Effect.map((rows) => new Map(rows.map((r) => [r.effect_id, toRow(r)]))))

/** One row's settlement in a page (SettlementPage.ts): a RowChange, with the row it was decided on. */
export interface PagedChange {
  readonly effectId: string
  readonly sequence: number
  readonly attempt: number
  /** The status the change was decided on: the write matches it (compare-and-set). */
  readonly fromStatus: OutboxStatus
  readonly status: RowChange["status"]
  readonly availableAt: number | undefined
  readonly response: string | null | undefined
  readonly error: string | null | undefined
  readonly keepLease: boolean
  /** Operator actions to count on the row. */
  readonly operatorActions: number
  /** It made the row pending at some point: cursors above it move back. */
  readonly requeued: boolean
  readonly now: number
}

/** Pure: `first` then `second` on one row, as one change (what applying both in order leaves). */
export const composeChanges = (first: PagedChange, second: PagedChange): PagedChange => ({
  ...second,
  fromStatus: first.fromStatus,
  availableAt: second.availableAt ?? first.availableAt,
  response: second.response === undefined ? first.response : second.response,
  error: second.error === undefined ? first.error : second.error,
  keepLease: first.keepLease && second.keepLease,
  operatorActions: first.operatorActions + second.operatorActions,
  requeued: first.requeued || second.requeued
})

/** What a change writes, apart from which row: changes with equal keys can share one statement. */
const changeKey = (c: PagedChange) =>
  JSON.stringify([
    c.attempt,
    c.fromStatus,
    c.status,
    c.availableAt ?? null,
    c.response === undefined ? 0 : 1,
    c.response ?? null,
    c.error === undefined ? 0 : 1,
    c.error ?? null,
    c.keepLease,
    c.operatorActions,
    c.now
  ])

/** Pure: the changes that write the same thing, grouped (in first-seen order); rows keep their order within a group. */
export const groupChanges = (changes: ReadonlyArray<PagedChange>): ReadonlyArray<ReadonlyArray<PagedChange>> => {
  const groups = new Map<string, Array<PagedChange>>()
  for (const c of changes) {
    const key = changeKey(c)
    const group = groups.get(key)
    if (group === undefined) groups.set(key, [c])
    else group.push(c)
  }
  return [...groups.values()]
}

/**
 * Fails the batch as a lost race (StorageErrors.isLostRace) when fewer rows matched than were changed:
 * a row's status or attempt moved since the page read it, under a writer not ordered with this one.
 * Never on SQLite (one writer); on PostgreSQL the batch runs again and decides on the row as it is.
 */
const allMatched = (changed: ReadonlyArray<unknown>, expected: number) =>
  changed.length === expected
    ? Effect.void
    : Effect.fail(
        new SqlError({
          cause: { code: LOST_RACE_CODE },
          message: `settlement lost a race: ${expected - changed.length} of ${expected} rows changed since they were read`
        })
      )

/**
 * A page of settlements, each row as it would be left changed alone, in few statements: rows that
 * change alike (a reconcile page: every row requeued with one reason at one time) in one
 * `UPDATE … WHERE effect_id IN (…)`, which costs SQLite about a third of a VALUES join per row; the
 * rest (outcomes, each with its own response) in one UPDATE over a VALUES list, cast so PostgreSQL
 * knows the values' types (its columns are named column1… there too).
 */
export const applyChanges = (changes: ReadonlyArray<PagedChange>) =>
  Effect.gen(function* () {
    const singles: Array<PagedChange> = []
    for (const group of groupChanges(changes)) {
      if (group.length === 1) singles.push(group[0]!)
      else yield* applyChangeTo(group)
    }
    if (singles.length === 1) return yield* applyChangeTo(singles)
    if (singles.length > 1) yield* applyDistinctChanges(singles)
  })

const applyDistinctChanges = (changes: ReadonlyArray<PagedChange>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient
    const values = sql.csv(
      changes.map(
        (c) =>
          sql`(CAST(${c.effectId} AS TEXT), CAST(${c.attempt} AS BIGINT), CAST(${c.status} AS TEXT),
          CAST(${c.availableAt ?? null} AS BIGINT), CAST(${c.response === undefined ? 0 : 1} AS INTEGER),
          CAST(${c.response ?? null} AS TEXT), CAST(${c.error === undefined ? 0 : 1} AS INTEGER),
          CAST(${c.error ?? null} AS TEXT), CAST(${c.keepLease ? 1 : 0} AS INTEGER),
          CAST(${c.operatorActions} AS INTEGER), CAST(${c.now} AS BIGINT), CAST(${c.fromStatus} AS TEXT))`
      )
    )
    const changed = yield* sql`UPDATE outbox SET status = c.column3,
        available_at = COALESCE(c.column4, outbox.available_at),
        response = CASE WHEN c.column5 = 1 THEN c.column6 ELSE outbox.response END,
        error = CASE WHEN c.column7 = 1 THEN c.column8 ELSE outbox.error END,
        lease_owner = CASE WHEN c.column9 = 1 THEN outbox.lease_owner ELSE NULL END,
        lease_expires_at = CASE WHEN c.column9 = 1 THEN outbox.lease_expires_at ELSE NULL END,
        operator_actions = outbox.operator_actions + c.column10,
        updated_at = c.column11
      FROM (VALUES ${values}) AS c
      WHERE outbox.effect_id = c.column1 AND outbox.attempts = c.column2 AND outbox.status = c.column12
      RETURNING effect_id`
    yield* allMatched(changed, changes.length)
  })

/**
 * One settlement decided by EffectOutcomes.decideSettlement (which checked the row's status in this
 * same transaction). Clears the lease, except where a cancelled performance has not stopped yet.
 */
const applyChangeTo = (alike: ReadonlyArray<PagedChange>) =>
  Effect.flatMap(SqlClient, (sql) => {
    const c = alike[0]!
    return sql`UPDATE outbox SET status = ${c.status},
        available_at = COALESCE(${c.availableAt ?? null}, available_at),
        response = CASE WHEN ${c.response === undefined ? 0 : 1} = 1 THEN ${c.response ?? null} ELSE response END,
        error = CASE WHEN ${c.error === undefined ? 0 : 1} = 1 THEN ${c.error ?? null} ELSE error END,
        lease_owner = CASE WHEN ${c.keepLease ? 1 : 0} = 1 THEN lease_owner ELSE NULL END,
        lease_expires_at = CASE WHEN ${c.keepLease ? 1 : 0} = 1 THEN lease_expires_at ELSE NULL END,
        operator_actions = operator_actions + ${c.operatorActions},
        updated_at = ${c.now}
      WHERE attempts = ${c.attempt} AND status = ${c.fromStatus} AND ${sql.in(
        "effect_id",
        alike.map((a) => a.effectId)
      )} RETURNING effect_id`.pipe(Effect.flatMap((changed) => allMatched(changed, alike.length)))
  })

/**
 * Cancels a pending or running row of this aggregate (a decision's `cancel`); settled rows are left as
 * they are. A running row keeps its lease owner, as under an operator's cancel: its performer learns
 * of the cancel (CancelWatch), stops the handler and then clears the lease.
 */
export const cancelUnsettled = (
  effectId: string,
  aggregateType: string,
  aggregateId: string,
  reason: string,
  now: number
) =>
  Effect.flatMap(
    SqlClient,
    (sql) =>
      sql`UPDATE outbox SET status = 'cancelled', error = ${JSON.stringify({ message: reason, reason: "cancelled" })}, updated_at = ${now}
      WHERE effect_id = ${effectId} AND status IN ('pending', 'running') AND aggregate_type = ${aggregateType} AND aggregate_id = ${aggregateId}`
  )

export interface ClaimRequest {
  readonly kinds: ReadonlyArray<string>
  readonly owner: string
  readonly now: number
  readonly leaseMs: number
  readonly limit: number
  /** Rows at or below this sequence are all settled for these kinds. */
  readonly after: number
  /** The outbox's commit horizon (StoreBackend.horizon): no row above it is claimed (a reactor passes it). */
  readonly upTo?: number | undefined
}

/**
 * Claims due pending rows in one conditional UPDATE: running, attempts+1, leased to `owner`. A row
 * is not claimable while an earlier unsettled row of its lane exists, so a lane runs in order (only
 * true of rows at or below the commit horizon: every earlier row of their lanes is visible); a
 * quarantined row is unsettled (its outcome is not recorded yet) and holds its lane until an
 * operator releases or fails it.
 */
export const claim = (request: ClaimRequest) =>
  Effect.flatMap(Effect.zip(SqlClient, StoreBackend), ([sql, backend]) => claimRun(sql, backend, request)).pipe(
    Effect.map(claimedRows)
  )

/** The rows a claim takes, in order: due pending rows of its kinds, first of their lanes (see `claim`). */
const claimable = (sql: SqlClient, backend: StoreBackendShape, request: ClaimRequest, limit: number) =>
  sql`SELECT o.sequence FROM outbox o
    WHERE o.status = 'pending' AND ${sql.in("o.kind", request.kinds)} AND o.available_at <= ${request.now}
      AND o.sequence > ${request.after}${request.upTo === undefined ? sql.literal("") : sql` AND o.sequence <= ${request.upTo}`}
      AND NOT EXISTS (
        SELECT 1 FROM outbox e WHERE e.lane = o.lane AND e.sequence < o.sequence AND e.status IN ('pending', 'running', 'quarantined')
      )
    ORDER BY o.sequence LIMIT ${limit} ${sql.literal(backend.skipLocked)}`

/** The claim's UPDATE of the rows `rows` selects (see `claim`). */
const claimUpdate = (sql: SqlClient, request: ClaimRequest, rows: Statement.Fragment) =>
  sql<Row>`UPDATE outbox SET status = 'running', attempts = attempts + 1, lease_owner = ${request.owner},
    lease_expires_at = ${request.now + request.leaseMs}, updated_at = ${request.now}
  WHERE sequence IN (${rows})
  RETURNING *`

/** The claim's UPDATE (see `claim`). */
const claimStatement = (sql: SqlClient, backend: StoreBackendShape, request: ClaimRequest) =>
  claimUpdate(sql, request, claimable(sql, backend, request, request.limit))

const claimRun = (sql: SqlClient, backend: StoreBackendShape, request: ClaimRequest) =>
  ifAnyOnSqlite(sql, backend, claimable(sql, backend, request, request.limit), claimStatement(sql, backend, request))

const claimedRows = (rows: ReadonlyArray<Row>) => rows.map(toRow).sort((a, b) => a.sequence - b.sequence)

/**
 * `claim`, and the earliest time after `now` at which a pending row of these kinds comes due
 * (undefined: none), for the reactor's next wake-up. On PostgreSQL in ONE round trip: the UPDATE in
 * a CTE, the due time read from the same snapshot (so it still sees the rows being claimed as
 * pending, but they are due by `now` and not counted). A row that becomes pending or due later than
 * this statement does so in a commit that rings the reactor. SQLite has no UPDATE in a CTE: two
 * statements.
 *
 * `more`: whether a claimable row may have been left unclaimed, for want of a slot or because another
 * transaction held it. False is a complete look as of the statement (CommitClaims.Claimer's `covered`,
 * the reactor's own coverage). On PostgreSQL the claim skips locked rows, so the same statement lists up
 * to `limit + 1` claimable rows without taking locks (it sees the rows it claims as still pending): a
 * claim that filled every slot can still say that it left nothing, and one that found fewer rows than
 * slots because others were locked says that it left some. On SQLite (one writer, nothing skipped) a
 * claim that took fewer rows than its limit left nothing; one that filled it may have.
 */
export const claimWithNextDue = (
  request: ClaimRequest
): Effect.Effect<
  { readonly claimed: ReadonlyArray<OutboxRow>; readonly due: number | undefined; readonly more: boolean },
  SqlError,
  SqlClient
> =>
  Effect.flatMap(Effect.zip(SqlClient, StoreBackend), ([sql, backend]) =>
    backend.dialect === "postgres"
      ? Effect.map(
          sql<Row & { next_due: number | string | null; claimable: number | string }>`WITH
            claimed AS (${claimStatement(sql, backend, request)}),
            due AS (SELECT MIN(available_at) AS next_due FROM outbox
              WHERE status = 'pending' AND ${sql.in("kind", request.kinds)} AND available_at > ${request.now}),
            seen AS (${claimable(sql, { ...backend, skipLocked: "" }, request, request.limit + 1)})
          SELECT c.*, d.next_due, (SELECT COUNT(*) FROM seen) AS claimable FROM due d LEFT JOIN claimed c ON TRUE`,
          (rows) => {
            // With nothing claimed, the one row is the due time's alone (the claimed columns NULL).
            const claimed = claimedRows(rows.filter((r) => r.effect_id !== null))
            return {
              claimed,
              due: rows[0]?.next_due === null || rows[0]?.next_due === undefined ? undefined : Number(rows[0].next_due),
              more: Number(rows[0]?.claimable ?? 0) > claimed.length
            }
          }
        )
      : Effect.zipWith(
          Effect.map(claimRun(sql, backend, request), claimedRows),
          nextDueAfter(request.kinds, request.now),
          (claimed, due) => ({ claimed, due, more: claimed.length >= request.limit })
        )
  )

/**
 * Runs a conditional UPDATE of one row that ends `RETURNING effect_id`: true when the row still
 * matched (its status, attempt or lease had not moved), false when it had.
 */
const updatedOne = (update: (sql: SqlClient) => Effect.Effect<ReadonlyArray<unknown>, SqlError>) =>
  Effect.flatMap(SqlClient, update).pipe(Effect.map((rows) => rows.length === 1))

/** Extends a lease this owner still holds. False when it was lost (reclaimed, settled, or stale). */
export const renew = (effectId: string, attempt: number, owner: string, expiresAt: number, now: number) =>
  updatedOne(
    (sql) =>
      sql`UPDATE outbox SET lease_expires_at = ${expiresAt}, updated_at = ${now}
      WHERE effect_id = ${effectId} AND status = 'running' AND attempts = ${attempt} AND lease_owner = ${owner}
      RETURNING effect_id`
  )

/**
 * The owner's word that its handler for this attempt has stopped, on a row that was settled under it
 * (an operator's cancel keeps the lease until then). `updated_at` stays: it dates the settlement.
 */
export const acknowledgeStopped = (effectId: string, attempt: number, owner: string, errorJson?: string) =>
  Effect.flatMap(
    SqlClient,
    (sql) =>
      sql`UPDATE outbox SET lease_owner = NULL, lease_expires_at = NULL, error = COALESCE(${errorJson ?? null}, error)
      WHERE effect_id = ${effectId} AND attempts = ${attempt} AND lease_owner = ${owner} AND status <> 'running'`
  ).pipe(Effect.asVoid)

/** Status, attempt and lease owner of these rows, by effect id (a performer's watch of its own rows). */
export const leaseStates = (effectIds: ReadonlyArray<string>) =>
  Effect.flatMap(
    SqlClient,
    (sql) =>
      sql<{
        effect_id: string
        status: OutboxStatus
        attempts: number
        lease_owner: string | null
      }>`SELECT effect_id, status, attempts, lease_owner FROM outbox WHERE ${sql.in("effect_id", effectIds)}`
  ).pipe(
    Effect.map(
      (rows) =>
        new Map(
          rows.map((r) => [r.effect_id, { status: r.status, attempts: Number(r.attempts), leaseOwner: r.lease_owner }])
        )
    )
  )

/** Hands an unfinished row back to pending (graceful shutdown of a replay-safe effect). */
export const release = (effectId: string, attempt: number, owner: string, now: number) =>
  updatedOne(
    (sql) =>
      sql`UPDATE outbox SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL,
        available_at = ${now}, updated_at = ${now}
      WHERE effect_id = ${effectId} AND status = 'running' AND attempts = ${attempt} AND lease_owner = ${owner}
      RETURNING effect_id`
  )

/**
 * Parks a running row whose settlement its aggregate cannot record: status `quarantined`, lease
 * cleared, the record stored. False when the row is no longer running at this attempt.
 */
export const park = (effectId: string, attempt: number, record: QuarantineRecord) =>
  updatedOne(
    (sql) =>
      sql`UPDATE outbox SET status = 'quarantined', quarantine = ${JSON.stringify(record)},
        lease_owner = NULL, lease_expires_at = NULL, updated_at = ${record.at}
      WHERE effect_id = ${effectId} AND status = 'running' AND attempts = ${attempt}
      RETURNING effect_id`
  )

/** Stores a newer record on a row that is still parked at this attempt (a release that failed again). */
export const reparked = (effectId: string, attempt: number, record: QuarantineRecord) =>
  updatedOne(
    (sql) =>
      sql`UPDATE outbox SET quarantine = ${JSON.stringify(record)}, updated_at = ${record.at}
      WHERE effect_id = ${effectId} AND status = 'quarantined' AND attempts = ${attempt}
      RETURNING effect_id`
  )

/** An operator ends a parked row as failed, with their reason; the owning aggregate is not told. */
export const failParked = (effectId: string, attempt: number, errorJson: string, now: number) =>
  updatedOne(
    (sql) =>
      sql`UPDATE outbox SET status = 'failed', error = ${errorJson}, updated_at = ${now}
      WHERE effect_id = ${effectId} AND status = 'quarantined' AND attempts = ${attempt}
      RETURNING effect_id`
  )

/** Running rows not held by a live owner: `liveOwners` keep theirs. */
export const runningNotOwnedBy = (liveOwners: ReadonlyArray<string>, limit: number) =>
  Effect.flatMap(SqlClient, (sql) =>
    liveOwners.length === 0
      ? sql<Row>`SELECT * FROM outbox WHERE status = 'running' ORDER BY sequence LIMIT ${limit}`
      : sql<Row>`SELECT * FROM outbox WHERE status = 'running' AND (lease_owner IS NULL OR NOT ${sql.in("lease_owner", liveOwners)})
          ORDER BY sequence LIMIT ${limit}`
  ).pipe(Effect.map((rows) => rows.map(toRow)))

/**
 * Running rows leased by earlier incarnations of this node (shared store): the node id is held by
 * this process alone (StoreBackend.holdNodeId), so those owners are dead.
 */
export const runningOfEarlierIncarnations = (nodeId: string, currentOwner: string, limit: number) =>
  Effect.flatMap(
    SqlClient,
    (sql) =>
      sql<Row>`SELECT o.* FROM outbox o JOIN owners w ON w.owner_id = o.lease_owner
      WHERE o.status = 'running' AND w.node_id = ${nodeId} AND o.lease_owner <> ${currentOwner}
      ORDER BY o.sequence LIMIT ${limit}`
  ).pipe(Effect.map((rows) => rows.map(toRow)))

/**
 * On SQLite, runs `read` only when `candidates` (the same rows) holds one. Most of the reactors'
 * claims and dead-owner sweeps find nothing (a wake after a commit whose rows the commit claimed
 * already, a liveness poll, a sweep with no lapsed lease), and they cost ≈ 50 µs even then (measured
 * on a simulated seed's store): the claim materializes and sorts its row list inside a write
 * transaction, the sweep's ordered read builds an ephemeral table for its `kind IN (…)` list. Asking
 * whether any row qualifies costs 7–13 µs. Same answer: where no row qualifies, `read` would return
 * (and the claim change) nothing, so the look is one as of the first statement, as a look is always
 * one as of its statement; where one does, `read` selects its rows again itself. So an idle claim no
 * longer writes: a store that refuses writes is met by the first claim that has a row to take.
 * On PostgreSQL the one statement is kept (one round trip; the claim's CTE).
 */
const ifAnyOnSqlite = <A>(
  sql: SqlClient,
  backend: StoreBackendShape,
  candidates: Statement.Fragment,
  read: Effect.Effect<ReadonlyArray<A>, SqlError>
): Effect.Effect<ReadonlyArray<A>, SqlError> =>
  backend.dialect === "sqlite"
    ? Effect.flatMap(sql<{ found: number }>`SELECT EXISTS (${candidates}) AS found`, (rows) =>
        Number(rows[0]?.found ?? 1) === 0 ? Effect.succeed([]) : read
      )
    : read

/**
 * Running rows whose lease expired and whose owner's heartbeat stopped before `deadBefore`, never
 * `judge`'s own: a process that could not renew its own lease is alive, whatever its heartbeat says.
 */
export const reclaimable = (
  now: number,
  deadBefore: number,
  limit: number,
  kinds: ReadonlyArray<string>,
  judge: string
) =>
  Effect.flatMap(Effect.zip(SqlClient, StoreBackend), ([sql, backend]) => {
    const lapsed = sql`FROM outbox o LEFT JOIN owners w ON w.owner_id = o.lease_owner
      WHERE o.status = 'running' AND o.lease_expires_at < ${now} AND ${sql.in("o.kind", kinds)}
        AND (o.lease_owner IS NULL OR o.lease_owner <> ${judge})
        AND (w.owner_id IS NULL OR w.stopped_at IS NOT NULL OR w.heartbeat_at < ${deadBefore})`
    return ifAnyOnSqlite(
      sql,
      backend,
      sql`SELECT 1 ${lapsed}`,
      sql<Row>`SELECT o.* ${lapsed} ORDER BY o.sequence LIMIT ${limit}`
    )
  }).pipe(Effect.map((rows) => rows.map(toRow)))

/** The earliest time after `now` at which a pending row of these kinds comes due, if any. */
const nextDueAfter = (kinds: ReadonlyArray<string>, now: number) =>
  Effect.flatMap(
    SqlClient,
    (sql) =>
      sql<{ due: number | string | null }>`SELECT MIN(available_at) AS due FROM outbox
      WHERE status = 'pending' AND ${sql.in("kind", kinds)} AND available_at > ${now}`
  ).pipe(Effect.map((rows) => (rows[0]?.due === null || rows[0]?.due === undefined ? undefined : Number(rows[0].due))))

/** The earliest time a pending row of these kinds becomes due, if any. */
export const nextDue = (kinds: ReadonlyArray<string>, after: number) =>
  Effect.flatMap(
    SqlClient,
    (sql) =>
      sql<{ due: number | null }>`SELECT MIN(available_at) AS due FROM outbox
      WHERE status = 'pending' AND ${sql.in("kind", kinds)} AND sequence > ${after}`
  ).pipe(Effect.map((rows) => (rows[0]?.due === null || rows[0]?.due === undefined ? undefined : Number(rows[0].due))))

export interface ListOptions {
  readonly status?: OutboxStatus | undefined
  readonly kind?: string | undefined
  readonly aggregateId?: string | undefined
  readonly limit?: number | undefined
}

export const list = (options: ListOptions = {}) =>
  Effect.flatMap(SqlClient, (sql) => {
    const conditions = [
      options.status === undefined ? sql`1 = 1` : sql`status = ${options.status}`,
      options.kind === undefined ? sql`1 = 1` : sql`kind = ${options.kind}`,
      options.aggregateId === undefined ? sql`1 = 1` : sql`aggregate_id = ${options.aggregateId}`
    ]
    return sql<Row>`SELECT * FROM outbox WHERE ${sql.and(conditions)} ORDER BY sequence LIMIT ${options.limit ?? 100}`
  }).pipe(Effect.map((rows) => rows.map(toRow)))

export const countsByStatus = Effect.flatMap(
  SqlClient,
  (sql) => sql<{ status: OutboxStatus; n: number }>`SELECT status, COUNT(*) AS n FROM outbox GROUP BY status`
).pipe(
  Effect.map(
    (rows) => Object.fromEntries(rows.map((r) => [r.status, Number(r.n)])) as Partial<Record<OutboxStatus, number>>
  )
)
