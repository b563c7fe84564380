//! The README's Rust quick start, verbatim between the markers: `Notes`, a
//! source that writes its own `sent` table and enqueues a row for the inbox
//! named in one transaction, and `Inbox`, a plain target. The book's "your
//! own crate from scratch" builds a fresh crate from exactly this code.

// readme: quick start
use durable_relay::prelude::*;

/// Your table, created beside the outbox: one list of statements per version.
const SENT_TABLE: Migrations = &[&["CREATE TABLE IF NOT EXISTS sent (text TEXT NOT NULL)"]];

#[durable_object]
pub struct Notes {
    relay: RelaySource,
}

impl DurableObject for Notes {
    fn new(state: State, env: Env) -> Self {
        Notes { relay: RelaySource::new(state, env).targets("INBOXES").tables("notes", SENT_TABLE) }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        match (req.method(), req.path().strip_prefix("/notes/")) {
            (Method::Post, Some(to)) => respond(self.add(to, &mut req).await),
            _ => self.relay.fetch(req).await,
        }
    }

    async fn alarm(&self) -> worker::Result<Response> {
        self.relay.alarm().await // delivers, in order, within the budgets
    }
}

impl Notes {
    async fn add(&self, to: &str, req: &mut Request) -> Result<Response, RelayError> {
        let text = read_body(req).await?;
        let row = row(to)?.put("note", text.as_str().into());
        let write = |sql: &DoSql, _: &_| {
            sql.run("INSERT INTO sent VALUES (?)", vec![text.as_str().into()])?;
            Ok(())
        };
        // Your write and the row, atomically: both commit, or neither does.
        let (_, done) = self.relay.enqueue_with(&[row], Enqueue::default(), write).await?;
        Ok(json(&done)?)
    }
}

#[durable_object]
pub struct Inbox {
    relay: RelayTarget, // applies each row once; keys readable at /keys
}

impl DurableObject for Inbox {
    fn new(state: State, _env: Env) -> Self {
        Inbox { relay: RelayTarget::new(&state) }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        self.relay.fetch(req).await
    }
}
// readme: end
