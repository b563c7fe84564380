//! Schema versions: each component (the outbox, the inbox, the test-only
//! tables, an embedder's own tables) records its version in `relay_schema`
//! and migrates forward, in one transaction, on first use. Migrations are
//! append-only: a version that shipped is never edited, only followed by
//! another.
//!
//! Two releases always run side by side for a while (a deploy, a gradual
//! deployment, a rollback), so a component keeps two versions, as SQLite's
//! file header keeps a read and a write version:
//!
//! - the **required** version, stored under the component's own name: a
//!   build must know at least this version to run on the storage. Every
//!   build ever released reads this row, and refuses a version newer than
//!   it knows, so this is the number an older build is judged by.
//! - the **applied** version, stored under `<component>.applied`: the
//!   steps applied. It is ahead of the required version when the newest
//!   steps are ones the build before could run on (a new table, a new
//!   column with a default, a new index: see [`Schema::required`]).
//!
//! A build runs on storage whose required version it knows, even when the
//! applied version is past its own newest: those steps were written to be
//! run on by it. It migrates only storage behind its own newest, and never
//! lowers either version. Storage written before the applied row existed
//! has none: its applied version is its required one.

use super::{int, Sql, SqlValue, StoreError};

/// A component's stored schema: where its versions are kept, the steps that
/// build it, and which of them an older build can run on.
#[derive(Clone, Copy, Debug)]
pub struct Schema {
    /// The component's name in `relay_schema` (its required version's row).
    pub component: &'static str,
    /// `migrations[i]` moves version `i` to `i + 1`.
    pub migrations: &'static [&'static [&'static str]],
    /// The version a build must know to run on this schema's newest
    /// version: the last step a build before it could not run on. Every
    /// step after it only adds what an older build never reads (a table, a
    /// column with a default, an index) and keeps what it writes valid.
    /// Invariant: `required <= newest()`.
    pub required: u32,
}

impl Schema {
    /// A schema every one of whose steps is required: a build that does not
    /// know the newest version refuses the storage (the rule for an
    /// embedder's own tables, which the relay cannot judge).
    pub const fn strict(component: &'static str, migrations: &'static [&'static [&'static str]]) -> Schema {
        Schema { component, migrations, required: migrations.len() as u32 }
    }

    /// The newest version its steps reach.
    pub fn newest(&self) -> u32 {
        versions(self.migrations)
    }

    /// The first `version` steps of this schema, as the build that knew
    /// them wrote them (every step required, as builds before the applied
    /// version did): refuses a version past the newest.
    pub fn first(&self, version: u32) -> Result<Schema, StoreError> {
        let migrations = first_versions(self.migrations, version)?;
        Ok(Schema { required: version.min(self.required), ..Schema::strict(self.component, migrations) })
    }
}

/// Both versions a component's storage holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stored {
    /// The version a build must know to run here (0: nothing stored).
    pub required: u32,
    /// The steps applied. Invariant: `applied >= required`.
    pub applied: u32,
}

/// Brings `component`'s tables to the newest version by running every
/// migration after the stored one; every step is required (see
/// [`Schema::strict`]). Returns the version now applied.
pub fn migrate(
    sql: &impl Sql,
    component: &'static str,
    migrations: &'static [&'static [&'static str]],
) -> Result<u32, StoreError> {
    migrate_schema(sql, &Schema::strict(component, migrations))
}

/// Brings `schema`'s tables to its newest version, unless the storage is
/// there or past it. Refuses storage whose required version this build
/// does not know. Returns the version now applied (past this build's newest
/// when a newer build applied steps this one can run on).
pub fn migrate_schema(sql: &impl Sql, schema: &Schema) -> Result<u32, StoreError> {
    let newest = schema.newest();
    debug_assert!(schema.required <= newest, "{}: required past newest", schema.component);
    let stored = stored_versions(sql, schema.component)?;
    if stored.required > newest {
        return Err(StoreError::Sql(format!(
            "{} schema is version {}; this build knows up to {newest}",
            schema.component, stored.required
        )));
    }
    if stored.applied >= newest {
        return Ok(stored.applied);
    }
    let pending = schema.migrations.get(stored.applied as usize..).unwrap_or_default();
    let required = stored.required.max(schema.required);
    sql.transaction(|| {
        for step in pending {
            for statement in *step {
                sql.run(statement, vec![])?;
            }
        }
        write_version(sql, schema.component, required)?;
        // Where none is written, the applied version is the required one.
        if newest > required {
            write_version(sql, &applied_row(schema.component), newest)?;
        }
        Ok(())
    })?;
    Ok(newest)
}

/// The name the applied version is stored under.
fn applied_row(component: &str) -> String {
    format!("{component}.applied")
}

fn write_version(sql: &impl Sql, row: &str, version: u32) -> Result<(), StoreError> {
    sql.run(
        "INSERT INTO relay_schema (component, version) VALUES (?, ?) \
         ON CONFLICT(component) DO UPDATE SET version = excluded.version",
        vec![SqlValue::from(row), int(u64::from(version))],
    )?;
    Ok(())
}

/// Both versions stored for `component` (0 and 0 when none; the applied
/// version is the required one where no applied row was written).
pub fn stored_versions(sql: &impl Sql, component: &str) -> Result<Stored, StoreError> {
    sql.run(
        "CREATE TABLE IF NOT EXISTS relay_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)",
        vec![],
    )?;
    let applied = applied_row(component);
    let rows = sql.rows(
        "SELECT component, version FROM relay_schema WHERE component IN (?, ?)",
        vec![component.into(), applied.as_str().into()],
    )?;
    let mut stored = Stored { required: 0, applied: 0 };
    let mut applied_seen = None;
    for row in &rows {
        if row.text(0)? == component {
            stored.required = row.u32(1)?;
        } else {
            applied_seen = Some(row.u32(1)?);
        }
    }
    stored.applied = applied_seen.unwrap_or(stored.required).max(stored.required);
    Ok(stored)
}

/// The required version stored for `component` (0 when none).
pub fn stored_version(sql: &impl Sql, component: &str) -> Result<u32, StoreError> {
    Ok(stored_versions(sql, component)?.required)
}

/// The newest version `migrations` reach.
pub fn versions(migrations: &[&[&str]]) -> u32 {
    u32::try_from(migrations.len()).unwrap_or(u32::MAX)
}

/// The migrations that reach `version` and no further; refuses a version
/// past the newest.
pub fn first_versions<'a>(
    migrations: &'a [&'a [&'a str]],
    version: u32,
) -> Result<&'a [&'a [&'a str]], StoreError> {
    let newest = versions(migrations);
    migrations.get(..version as usize).ok_or_else(|| {
        StoreError::Sql(format!("schema version {version} is unknown; this build knows up to {newest}"))
    })
}
