//! Schema upgrades under test: bring a fresh database to an older schema
//! version of a component, as an object written by an older release would
//! be, so a test can fill it and let the current code open (and migrate) it.
//! The fixtures under `tests/fixtures/upgrade/` hold one such object per
//! version; `tests/upgrades.rs` drives them.

use crate::store::{inbox, outbox, schema, Sql, StoreError};

/// A component whose schema migrates forward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    /// The source's outbox (`relay_source`).
    Source,
    /// The target's inbox (`relay_target`).
    Target,
}

impl Component {
    /// Both components.
    pub const ALL: [Component; 2] = [Component::Source, Component::Target];

    /// The name its fixture files start with (`source-v3.sql`).
    pub fn fixture_prefix(self) -> &'static str {
        match self {
            Component::Source => "source",
            Component::Target => "target",
        }
    }

    /// Its stored schema.
    fn schema(self) -> schema::Schema {
        match self {
            Component::Source => outbox::SCHEMA,
            Component::Target => inbox::SCHEMA,
        }
    }

    /// The name its version is stored under in `relay_schema`.
    pub fn schema_name(self) -> &'static str {
        self.schema().component
    }

    /// The newest schema version this build knows.
    pub fn newest(self) -> u32 {
        self.schema().newest()
    }

    /// The version a build must know to run on this build's newest schema.
    pub fn required(self) -> u32 {
        self.schema().required
    }
}

/// Brings `sql` to schema version `version` of `component` and no further
/// (0 creates nothing but the version table). Refuses a version past the
/// newest, and a database already past `version`.
pub fn migrate_to(sql: &impl Sql, component: Component, version: u32) -> Result<u32, StoreError> {
    schema::migrate_schema(sql, &component.schema().first(version)?)
}
