//! The target facade: [`RelayTarget`] opens the inbox in your object on first
//! use, runs your [`OnApply`] handler inside each batch's transaction and
//! serves the relay's target protocol.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]
#![deny(clippy::unreachable, clippy::todo, clippy::unimplemented)]

use std::cell::OnceCell;

use worker::{Request, Response, State};

use super::Migrations;
use crate::durable::DoSql;
use crate::hook::{Hook, KeysOnly, OnApply};
use crate::http::{respond, RelayError};
use crate::store::inbox::Inbox;
use crate::store::schema;

/// The target side of the relay in your Durable Object.
pub struct RelayTarget<H = KeysOnly> {
    sql: DoSql,
    handler: H,
    tables: Option<(&'static str, Migrations)>,
    inbox: OnceCell<Inbox<DoSql>>,
}

impl RelayTarget {
    /// The inbox of the object whose `state` this is, keeping the rows'
    /// keys. Nothing is opened until first use.
    pub fn new(state: &State) -> RelayTarget {
        RelayTarget { sql: DoSql::new(state), handler: KeysOnly, tables: None, inbox: OnceCell::new() }
    }
}

impl<H: OnApply> RelayTarget<H> {
    /// Runs `handler` on every batch applied, inside its transaction.
    pub fn on_apply<G: OnApply>(self, handler: G) -> RelayTarget<G> {
        RelayTarget { sql: self.sql, handler, tables: self.tables, inbox: self.inbox }
    }

    /// Creates or migrates your own tables when the inbox opens.
    pub fn tables(mut self, component: &'static str, migrations: Migrations) -> RelayTarget<H> {
        self.tables = Some((component, migrations));
        self
    }

    /// The inbox, opened on first use.
    pub fn inbox(&self) -> Result<&Inbox<DoSql>, RelayError> {
        if let Some(inbox) = self.inbox.get() {
            return Ok(inbox);
        }
        let inbox = Inbox::open(self.sql.clone())?;
        if let Some((component, migrations)) = self.tables {
            schema::migrate(&self.sql, component, migrations)?;
        }
        Ok(self.inbox.get_or_init(|| inbox))
    }

    /// The object's database, for your own tables (opened, with them).
    pub fn sql(&self) -> Result<&DoSql, RelayError> {
        self.inbox()?;
        Ok(&self.sql)
    }

    /// Serves the relay's target protocol (`/apply` from sources, keys,
    /// watermarks): see [`durable::target`](crate::durable::target).
    pub async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let served = match self.inbox() {
            Ok(inbox) => {
                let hook = Hook { sql: &self.sql, handler: &self.handler };
                crate::durable::target::handle(inbox, &mut req, &hook).await
            }
            Err(e) => Err(e),
        };
        respond(served).map(crate::durable::announce)
    }
}
