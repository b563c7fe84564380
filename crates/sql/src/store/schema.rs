//! Schema versions: each component (the outbox, the inbox, the test-only
//! tables) records its version in `relay_schema` and migrates forward, in
//! one transaction, on first use. Migrations are append-only: a version that
//! shipped is never edited, only followed by another. A stored version newer
//! than the code is refused (no downgrades).

use super::{int, Sql, SqlValue, StoreError};

/// Brings `component`'s tables to the newest version by running every
/// migration after the stored one. `migrations[i]` moves version `i` to
/// `i + 1`. Returns the version now stored.
pub fn migrate(sql: &impl Sql, component: &str, migrations: &[&[&str]]) -> Result<u32, StoreError> {
    let newest = versions(migrations);
    let stored = stored_version(sql, component)?;
    if stored > newest {
        return Err(StoreError::Sql(format!(
            "{component} schema is version {stored}; this build knows up to {newest}"
        )));
    }
    if stored == newest {
        return Ok(newest);
    }
    let pending = migrations.get(stored as usize..).unwrap_or_default();
    sql.transaction(|| {
        for step in pending {
            for statement in *step {
                sql.run(statement, vec![])?;
            }
        }
        sql.run(
            "INSERT INTO relay_schema (component, version) VALUES (?, ?) \
             ON CONFLICT(component) DO UPDATE SET version = excluded.version",
            vec![SqlValue::from(component), int(u64::from(newest))],
        )?;
        Ok(())
    })?;
    Ok(newest)
}

/// The version stored for `component` (0 when none).
pub fn stored_version(sql: &impl Sql, component: &str) -> Result<u32, StoreError> {
    sql.run(
        "CREATE TABLE IF NOT EXISTS relay_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)",
        vec![],
    )?;
    let row = sql.first("SELECT version FROM relay_schema WHERE component = ?", vec![component.into()])?;
    row.map_or(Ok(0), |r| r.u32(0))
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
