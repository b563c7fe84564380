//! The source's stored schema, step by step (component `relay_source`):
//! each step is the statements that take the tables from the version
//! before it, run once, in order, when an object opens (see `schema.rs`).
//! A step is never edited once released: a new schema is a new step.

use crate::store::schema;

/// The component name the source's schema version is kept under.
pub(super) const COMPONENT: &str = "relay_source";

const MIGRATIONS: &[&[&str]] = &[
    &[
        "CREATE TABLE relay_state (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            os INTEGER NOT NULL,
            rs TEXT,
            queued_rows INTEGER NOT NULL,
            queued_bytes INTEGER NOT NULL,
            enqueued_rows INTEGER NOT NULL,
            delivered_rows INTEGER NOT NULL,
            sql_rows_written INTEGER NOT NULL,
            alarms INTEGER NOT NULL,
            fires INTEGER NOT NULL,
            calls INTEGER NOT NULL,
            conflicts INTEGER NOT NULL,
            last_alarm TEXT
        )",
        "INSERT INTO relay_state VALUES (1, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL)",
        "CREATE TABLE relay_outbox (
            seq INTEGER PRIMARY KEY,
            target TEXT NOT NULL,
            at_ms INTEGER NOT NULL,
            bytes INTEGER NOT NULL,
            body TEXT NOT NULL
        )",
    ],
    &[
        "ALTER TABLE relay_state ADD COLUMN parked_rows INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE relay_state ADD COLUMN parked_bytes INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE relay_state ADD COLUMN dedup_hits INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE relay_state ADD COLUMN rejected_full INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE relay_state ADD COLUMN lag_breaches INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE relay_state ADD COLUMN last_prune_ms INTEGER NOT NULL DEFAULT 0",
        "CREATE TABLE relay_parked (
            seq INTEGER PRIMARY KEY,
            target TEXT NOT NULL,
            at_ms INTEGER NOT NULL,
            bytes INTEGER NOT NULL,
            body TEXT NOT NULL,
            discarded_at_ms INTEGER
        )",
        "CREATE TABLE relay_targets (
            target TEXT PRIMARY KEY,
            failed_cycles INTEGER NOT NULL,
            parked INTEGER NOT NULL,
            reason TEXT,
            first_failure_ms INTEGER,
            last_failure_ms INTEGER,
            last_error TEXT
        )",
        "CREATE TABLE relay_dedup (
            key TEXT PRIMARY KEY,
            digest TEXT NOT NULL,
            first_seq INTEGER NOT NULL,
            rows INTEGER NOT NULL,
            at_ms INTEGER NOT NULL
        )",
        "CREATE INDEX relay_dedup_at ON relay_dedup (at_ms)",
    ],
    // Version 3: the state row is folded lazily (see ledger.rs); delivered
    // rows are derived, which needs the rows ever discarded.
    &[
        "ALTER TABLE relay_state ADD COLUMN discarded_total INTEGER NOT NULL DEFAULT 0",
        "UPDATE relay_state SET discarded_total = MAX(0, os - queued_rows - parked_rows - delivered_rows)",
    ],
    // Version 4: delayed rows. Each row's effective due time (0: due at
    // once), and per target the latest due time of its held rows, which
    // later rows for the target inherit (see core::delay).
    &[
        "ALTER TABLE relay_outbox ADD COLUMN due_ms INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE relay_parked ADD COLUMN due_ms INTEGER NOT NULL DEFAULT 0",
        "CREATE TABLE relay_holds (target TEXT PRIMARY KEY, due_ms INTEGER NOT NULL)",
    ],
    // Version 5: partitioned sources. The newest routing epoch this
    // partition has seen, which fences routers running an older map.
    &["CREATE TABLE relay_partition (id INTEGER PRIMARY KEY CHECK (id = 1), epoch INTEGER NOT NULL)"],
    // Version 6: every promise at a partitioned source. The map a partition
    // adopted (checked before it is adopted); the content each idempotency
    // key names at its home partition; the due times a duplicate answers.
    &[
        "ALTER TABLE relay_partition ADD COLUMN map TEXT",
        "CREATE TABLE relay_claims (key TEXT PRIMARY KEY, digest TEXT NOT NULL, at_ms INTEGER NOT NULL)",
        "CREATE INDEX relay_claims_at ON relay_claims (at_ms)",
        "ALTER TABLE relay_dedup ADD COLUMN due_ms TEXT",
    ],
    // Version 7: bounded reads. A parked target's rows by target (its
    // count, page, redrive and discard read only its own rows), and the
    // target records by state (status reads one page of the parked and one
    // of the failing, however many thousands a long outage left).
    &[
        "CREATE INDEX relay_parked_target ON relay_parked (target, seq)",
        "CREATE INDEX relay_targets_parked ON relay_targets (parked, target)",
    ],
    // Version 8: exactly once through every sequence at a partitioned
    // source. Maps are adopted in two phases (prepared, then active, with
    // when); a key is recorded at a home no map change moves, with its
    // generation, attempt and reach; each object records what it took for
    // a key by target. The claims of version 6 are dropped: no release
    // wrote them.
    &[
        "ALTER TABLE relay_partition ADD COLUMN active INTEGER NOT NULL DEFAULT 1",
        "ALTER TABLE relay_partition ADD COLUMN since_ms INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE relay_partition ADD COLUMN known TEXT",
        "DROP TABLE relay_claims",
        "CREATE TABLE relay_keys (key TEXT PRIMARY KEY, digest TEXT NOT NULL, gen_ms INTEGER NOT NULL, \
         attempt INTEGER NOT NULL, reach TEXT NOT NULL)",
        "CREATE INDEX relay_keys_gen ON relay_keys (gen_ms)",
        "CREATE TABLE relay_routed (key TEXT PRIMARY KEY, digest TEXT NOT NULL, gen_ms INTEGER NOT NULL, \
         attempt INTEGER NOT NULL, taken TEXT NOT NULL, at_ms INTEGER NOT NULL)",
        "CREATE INDEX relay_routed_at ON relay_routed (at_ms)",
    ],
    // Version 9: rows written in the current UTC day (its number since the
    // epoch, and the count), folded into the state row with the other
    // counts, because Workers Free refuses writes past a daily allowance.
    &[
        "ALTER TABLE relay_state ADD COLUMN rows_written_day INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE relay_state ADD COLUMN rows_written_today INTEGER NOT NULL DEFAULT 0",
    ],
    // Version 10: the host's own alarm time. The object has one alarm; the
    // relay arms it at the earlier of its own time and the host's, which
    // it keeps here so a restart does not lose it (no row: none set).
    &["CREATE TABLE relay_host_alarm (id INTEGER PRIMARY KEY CHECK (id = 1), at_ms INTEGER NOT NULL)"],
    // Version 11: whether the object ever stored a partition map, in the
    // state row every enqueue reads already, so that an unrouted enqueue at
    // a source never partitioned reads no partition record. Set for a store
    // that holds one; `put_adoption` sets it with the map from then on.
    &[
        "ALTER TABLE relay_state ADD COLUMN map_stored INTEGER NOT NULL DEFAULT 0",
        "UPDATE relay_state SET map_stored = EXISTS (SELECT 1 FROM relay_partition)",
    ],
    // Version 12: the pause a failing target asked for with its last
    // failure (an endpoint's Retry-After), so that it is not called again
    // before it, across restarts (0: it asked for none).
    &["ALTER TABLE relay_targets ADD COLUMN retry_after_ms INTEGER NOT NULL DEFAULT 0"],
    // Version 13: packed rows (see pack.rs). A pack's oldest sequence
    // (NULL on a plain row), and the packs by sequence, so the window reads
    // only the packs in its range. A build before it runs on this step: it
    // writes no pack and reads none, and a partial index holds no plain
    // row, so its writes cost what they did. The first pack written raises
    // the required version to this one.
    &[
        "ALTER TABLE relay_outbox ADD COLUMN first_seq INTEGER",
        "CREATE INDEX relay_outbox_packs ON relay_outbox (seq) WHERE first_seq IS NOT NULL",
    ],
];

/// The outbox's stored schema. Every step up to 12 is required: the
/// releases before each could not run on it. Step 13 is not, until a pack
/// is written (see `pack.rs`).
pub(crate) const SCHEMA: schema::Schema =
    schema::Schema { component: COMPONENT, migrations: MIGRATIONS, required: 12 };
