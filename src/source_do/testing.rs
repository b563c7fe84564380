//! The reference source's test-build plumbing (feature `testing`, inert
//! unless `RELAY_TEST_FAULTS=on`): the storage suite over the object's
//! SQLite, the rows each request read and wrote, the fault switch and the
//! audit, and the second source class the identity tests bind.

use durable_relay::core::ErrorCode;
use durable_relay::durable::{now_ms, DoAlarm, DoSql};
use durable_relay::http::{json, RelayError};
use durable_relay::Relay;
use worker::{durable_object, wasm_bindgen, DurableObject, Env, Request, Response, State};

use super::{RelaySource, SourceSql};
use crate::routes::SourceRoute;

impl RelaySource {
    /// The storage suite over this object's SQLite (test builds, with
    /// faults on): 200 with the report when every check held and the
    /// script ran, else 500 with it.
    pub(super) async fn conformance(&self) -> Result<Response, RelayError> {
        if !crate::test_faults(self.env())? {
            return Err(RelayError::new(
                403,
                ErrorCode::FaultsDisabled,
                "test faults are off (RELAY_TEST_FAULTS)",
            ));
        }
        let report = durable_relay::testing::conformance::run(DoSql::new(self.state())).await;
        let status = if report.passed() { 200 } else { 500 };
        let internal = |e: worker::Error| RelayError::internal(e.to_string());
        Ok(json(&report).map_err(internal)?.with_status(status))
    }

    /// Test builds: the rows this request read and wrote, as the headers
    /// `x-relay-rows-read` and `x-relay-rows-written`, so a test can hold a
    /// route to a bounded cost.
    pub(super) fn with_io(
        &self,
        mut resp: Response,
        before: durable_relay::testing::SqlIo,
    ) -> worker::Result<Response> {
        let after = self.source.opened().map(|r| r.sql().io()).unwrap_or_default();
        let headers = resp.headers_mut();
        headers.set("x-relay-rows-read", &(after.read - before.read).to_string())?;
        headers.set("x-relay-rows-written", &(after.written - before.written).to_string())?;
        Ok(resp)
    }

    /// The fault switch and the audit (test builds, with faults on).
    pub(super) async fn testing(
        &self,
        relay: &Relay<SourceSql, DoAlarm>,
        req: &mut Request,
        route: SourceRoute,
    ) -> Result<Response, RelayError> {
        use durable_relay::http::{json, parse_json, read_body};
        use durable_relay::testing::SourceFaultsBody;
        if !crate::test_faults(self.env())? {
            return Err(RelayError::new(
                403,
                ErrorCode::FaultsDisabled,
                "test faults are off (RELAY_TEST_FAULTS)",
            ));
        }
        let internal = |e: worker::Error| RelayError::internal(e.to_string());
        if route == SourceRoute::Audit {
            let verdict = relay.outbox().audit()?;
            return json(&serde_json::json!({"ok": verdict.is_ok(), "breach": verdict.err().map(|b| b.0)}))
                .map_err(internal);
        }
        let body: SourceFaultsBody = parse_json(&read_body(req).await?)?;
        if body.retire_delay_ms > durable_relay::testing::MAX_RETIRE_DELAY_MS {
            return Err(RelayError::bad_request(
                ErrorCode::InvalidDelay,
                format!("retire_delay_ms is at most {}", durable_relay::testing::MAX_RETIRE_DELAY_MS),
            ));
        }
        if body.fail_alarms > durable_relay::testing::MAX_FAILED_ALARMS {
            return Err(RelayError::bad_request(
                ErrorCode::InvalidRequest,
                format!("fail_alarms is at most {}", durable_relay::testing::MAX_FAILED_ALARMS),
            ));
        }
        self.retire_delay_ms.set(body.retire_delay_ms);
        self.failing_alarms.set(body.fail_alarms);
        relay.sql().crash_checkpoints(body.crash_checkpoints);
        let (failing, parked) = (body.seed_failing_targets, body.seed_parked_targets);
        durable_relay::testing::seed_target_records(relay.sql(), failing, parked, now_ms())
            .map_err(|e| RelayError::bad_request(ErrorCode::InvalidRequest, e.to_string()))?;
        // Last: the seeding above is a write of its own.
        relay.sql().refuse_writes(body.refuse_writes);
        if body.drop_alarm {
            relay.drop_alarm().await?;
        }
        json(&serde_json::json!({"ok": true})).map_err(internal)
    }
}

/// Test builds: a second source class, the reference source under another
/// class name. Its objects' ids differ from `RelaySource`'s, so an object of
/// each class, both named `default`, are two sources at their targets
/// (`tests/e2e/identity.test.mjs` binds it as [`TWIN_SOURCE_BINDING`];
/// the front door reaches it when a request carries
/// [`TWIN_SOURCE_HEADER`](crate::front::TWIN_SOURCE_HEADER)).
#[durable_object]
pub struct RelaySourceTwin {
    /// The reference source, whole.
    inner: RelaySource,
}

/// Binding name of the test builds' second source class, `RelaySourceTwin`.
pub const TWIN_SOURCE_BINDING: &str = "TEST_SOURCE_TWIN";

impl DurableObject for RelaySourceTwin {
    fn new(state: State, env: Env) -> Self {
        RelaySourceTwin { inner: <RelaySource as DurableObject>::new(state, env) }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        DurableObject::fetch(&self.inner, req).await
    }

    async fn alarm(&self) -> worker::Result<Response> {
        DurableObject::alarm(&self.inner).await
    }
}
