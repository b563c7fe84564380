//! What travels between the benchmark's pieces: the bench apply call (rows
//! from any number of sources for one target, applied unconditionally), its
//! reply, the queue message, and the one helper that calls a target.

use serde::{Deserialize, Serialize};
use worker::{Method, ObjectNamespace};

use durable_relay::core::{Effects, Name};
use durable_relay::durable::{StubCall, StubReply};

/// Most rows one bench apply call may carry: one relay target batch.
pub const MAX_BENCH_APPLY_ROWS: u32 = durable_relay::core::MAX_BATCH_ROWS;

/// One row of a bench apply call.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchRow {
    /// The sending source.
    pub source: Name,
    /// Its sequence at that source.
    pub seq: u64,
    /// What to apply.
    pub effects: Effects,
}

/// The body of `POST /bench/apply` on a target.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchApply {
    /// Rows in the order the caller wants them applied.
    pub rows: Vec<BenchRow>,
}

/// A target's answer to a bench apply call. Every row is applied; the
/// counts say how the arrivals looked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BenchReply {
    /// Rows in the call.
    pub rows: u32,
    /// Rows that arrived for the first time.
    pub first: u32,
    /// Rows that had arrived before (applied again).
    pub duplicates: u32,
    /// First arrivals with a sequence below one already seen from the same
    /// source at this target.
    pub out_of_order: u32,
    /// SQLite rows the effects wrote.
    pub effect_rows_written: u32,
}

/// One queue message: one outbox row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueRow {
    /// The sending source.
    pub source: String,
    /// Its sequence at that source.
    pub seq: u64,
    /// Where it goes.
    pub target: String,
    /// The encoded effects (compact JSON text, as the outbox stores it).
    pub effects: String,
}

/// Encodes a bench apply body from `(source, seq, effects JSON text)`,
/// embedding each effects text verbatim (it was validated at enqueue).
pub fn encode_apply<'a>(rows: impl IntoIterator<Item = (&'a str, u64, &'a str)>) -> String {
    let mut out = String::from(r#"{"rows":["#);
    for (i, (source, seq, effects)) in rows.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(r#"{"source":"#);
        out.push_str(&serde_json::to_string(source).expect("strings serialise"));
        out.push_str(r#","seq":"#);
        out.push_str(&seq.to_string());
        out.push_str(r#","effects":"#);
        out.push_str(effects);
        out.push('}');
    }
    out.push_str("]}");
    out
}

/// Encodes the one-row call the relay would send for `row` from the
/// source whose object id is `source_id`: the body an endpoint target
/// takes (see `EndpointTargets::apply`), so the queue consumer sends the
/// very request the relay does.
pub fn encode_endpoint_call(row: &QueueRow, source_id: &str) -> String {
    format!(
        r#"{{"source":{},"source_id":{},"rows":[{{"seq":{},"effects":{}}}]}}"#,
        serde_json::to_string(&row.source).expect("strings serialise"),
        serde_json::to_string(source_id).expect("strings serialise"),
        row.seq,
        row.effects,
    )
}

/// Calls `POST /bench/apply` on `target`. `Err` carries why it failed
/// (a refusal, a fault-switched target, a runtime error).
pub async fn call_apply(
    namespace: &ObjectNamespace,
    target: &str,
    body: String,
) -> Result<BenchReply, String> {
    let call = StubCall::new(Method::Post, "/bench/apply").body(Some(body));
    let StubReply { status, text, .. } =
        call.read_from(namespace, target).await.map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!("{status}: {text}"));
    }
    serde_json::from_str(&text).map_err(|e| format!("bad reply: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_bodies_embed_effects_verbatim_and_decode() {
        let fx = r#"{"puts":[["k",1]],"deletes":[]}"#;
        let body = encode_apply([("s-1", 7, fx), ("s.2", 9, fx)]);
        let parsed: BenchApply = serde_json::from_str(&body).unwrap();
        assert_eq!(parsed.rows.len(), 2);
        assert_eq!(parsed.rows[0].source.as_str(), "s-1");
        assert_eq!(parsed.rows[1].seq, 9);
        assert_eq!(parsed.rows[0].effects.count(), 1);
        let bad = encode_apply([("s\"2", 9, fx)]);
        assert!(bad.contains(r#""s\"2""#), "names are escaped");
        assert!(serde_json::from_str::<BenchApply>(&bad).is_err(), "the decoder validates names");
    }

    #[test]
    fn an_endpoint_call_is_the_relays_one_row_batch() {
        let row = QueueRow {
            source: "s.1".into(),
            seq: 7,
            target: "endpoint:hook".into(),
            effects: r#"{"puts":[["k",1]]}"#.into(),
        };
        let body = encode_endpoint_call(&row, "ab12");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["source"], "s.1");
        assert_eq!(v["source_id"], "ab12");
        assert_eq!(v["rows"][0]["seq"], 7);
        assert_eq!(v["rows"][0]["effects"]["puts"][0][1], 1);
        assert_eq!(v["rows"].as_array().unwrap().len(), 1);
    }
}
