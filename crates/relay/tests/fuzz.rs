//! Generator-driven tests of every decoder that request bytes reach: value
//! JSON, enqueue bodies, target apply batches, request lines (paths and
//! queries of both Durable Objects' protocols; the reference Worker's
//! front door has its own in its crate), idempotency
//! keys, bearer headers, a partition router's headers, bodies and maps, and
//! the persisted encodings a corrupt store could hand back. Each must never panic (with `panic = "abort"` a panic kills
//! the isolate); each refusal is a typed error with a known code; each
//! accepted value round-trips to the target exactly.
//!
//! 127,000 generated inputs per run (the case counts below), from one base seed printed at
//! the start. `RELAY_FUZZ_SEED=<seed>` replays a run; `RELAY_FUZZ_SCALE=<n>`
//! multiplies every case count. Inputs a run found are kept as named
//! regression tests at the bottom of this file.

use durable_relay::core::json::canonical;
use durable_relay::core::{
    decode_enqueue, decode_request, encode_request, encode_rows, plan_encoded, Capacity, Effects, Name,
    QueuedRow, ScanState, StoredRow, TargetCall, ValueError, MAX_VALUE_DEPTH,
};
use durable_relay::routes::{SourceOp, TargetOp};
use proptest::prelude::*;

#[path = "support/fuzz.rs"]
mod support;
use proptest::test_runner::TestCaseError;
use support::{fuzz, methods, query_text, request_url, segment, target_name};

// ---- JSON values with their expected canonical form ------------------------

/// One character of a JSON string as written.
#[derive(Clone, Debug)]
enum Piece {
    /// Written as itself (never `"`, `\` or a control character).
    Lit(char),
    /// Written with its short escape (`\n`, `\"`, ...).
    Short(char),
    /// Written as `\uXXXX` (a BMP character that is not a surrogate).
    U(char),
    /// Written as a `\uD8xx\uDCxx` surrogate pair.
    Pair(char),
    /// `\uXXXX` of a lone surrogate: not representable, must be refused.
    Lone(u16),
}

/// A JSON value as a generator sees it.
#[derive(Clone, Debug)]
enum J {
    Null,
    Bool(bool),
    Num(String),
    Str(Vec<Piece>),
    Arr(Vec<J>),
    Obj(Vec<(Vec<Piece>, J)>),
}

fn lit_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => proptest::char::range('a', 'z'),
        1 => proptest::char::range(' ', '~').prop_filter("needs escaping", |c| !matches!(c, '"' | '\\')),
        1 => Just('\u{7f}'),
        1 => proptest::char::range('\u{a0}', '\u{2fff}'),
        1 => prop_oneof![Just('\u{2028}'), Just('\u{2029}'), Just('\u{feff}'), Just('\u{fffd}')],
        1 => proptest::char::range('\u{1f300}', '\u{1f64f}'),
        1 => proptest::char::range('\u{e000}', '\u{10ffff}'),
    ]
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        8 => lit_char().prop_map(Piece::Lit),
        2 => prop_oneof![Just('"'), Just('\\'), Just('/'), Just('\u{8}'), Just('\u{c}'), Just('\n'), Just('\r'), Just('\t')]
            .prop_map(Piece::Short),
        2 => prop_oneof![proptest::char::range('\u{0}', '\u{1f}'), proptest::char::range('\u{20}', '\u{d7ff}')]
            .prop_map(Piece::U),
        1 => proptest::char::range('\u{10000}', '\u{10ffff}').prop_map(Piece::Pair),
        1 => (0xd800u16..0xe000).prop_map(Piece::Lone),
    ]
}

fn string_pieces(max: usize) -> impl Strategy<Value = Vec<Piece>> {
    prop::collection::vec(piece(), 0..max)
}

fn number() -> impl Strategy<Value = String> {
    let digits = |n: std::ops::Range<usize>| prop::collection::vec(0u8..10, n);
    let int = (any::<bool>(), 1u8..10, digits(0..40)).prop_map(|(neg, first, rest)| {
        let body: String = std::iter::once(first).chain(rest).map(|d| char::from(b'0' + d)).collect();
        format!("{}{body}", if neg { "-" } else { "" })
    });
    let frac = digits(1..30).prop_map(|d| d.into_iter().map(|d| char::from(b'0' + d)).collect::<String>());
    let exp = (prop_oneof![Just("e"), Just("E")], prop_oneof![Just(""), Just("+"), Just("-")], 0u32..2_000)
        .prop_map(|(e, s, n)| format!("{e}{s}{n}"));
    prop_oneof![
        3 => any::<i64>().prop_map(|n| n.to_string()),
        2 => any::<u64>().prop_map(|n| n.to_string()),
        1 => prop_oneof![Just("0"), Just("-0"), Just("9007199254740991"), Just("9007199254740993"), Just("1e400"),
            Just("-1e-400"), Just("123456789012345678901234567890"), Just("0.1"), Just("2.50")]
            .prop_map(str::to_owned),
        3 => (int.clone(), proptest::option::of(frac), proptest::option::of(exp))
            .prop_map(|(i, f, e)| format!("{i}{}{}", f.map(|f| format!(".{f}")).unwrap_or_default(), e.unwrap_or_default())),
        1 => (any::<bool>(), proptest::option::of(digits(1..5)))
            .prop_map(|(neg, f)| format!("{}0{}", if neg { "-" } else { "" },
                f.map(|d| format!(".{}", d.into_iter().map(|d| char::from(b'0' + d)).collect::<String>())).unwrap_or_default())),
    ]
}

fn json() -> impl Strategy<Value = J> {
    let leaf = prop_oneof![
        1 => Just(J::Null),
        1 => any::<bool>().prop_map(J::Bool),
        3 => number().prop_map(J::Num),
        3 => string_pieces(12).prop_map(J::Str),
    ];
    leaf.prop_recursive(6, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(J::Arr),
            // Keys from a small alphabet collide now and then.
            prop::collection::vec((prop_oneof![3 => string_pieces(3), 1 => string_pieces(10)], inner), 0..6)
                .prop_map(J::Obj),
        ]
    })
}

/// A value nested `depth` containers deep around a leaf.
fn deep_json() -> impl Strategy<Value = J> {
    (MAX_VALUE_DEPTH - 4..MAX_VALUE_DEPTH + 6, prop::collection::vec(any::<bool>(), 80)).prop_map(
        |(depth, kinds)| {
            let mut v = J::Num("1".into());
            for i in 0..depth as usize {
                v = if kinds[i % kinds.len()] {
                    J::Arr(vec![v])
                } else {
                    J::Obj(vec![(vec![Piece::Lit('k')], v)])
                };
            }
            v
        },
    )
}

/// Renders `j` as JSON text, with whitespace chosen by `ws` between tokens.
fn render(j: &J, ws: &[u8], at: &mut usize, out: &mut String) {
    let space = |out: &mut String, at: &mut usize| {
        let w = ws.get(*at % ws.len().max(1)).copied().unwrap_or(0);
        *at += 1;
        out.push_str(match w % 6 {
            0..=2 => "",
            3 => " ",
            4 => "\n\t",
            _ => " \r\n ",
        });
    };
    match j {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Num(n) => out.push_str(n),
        J::Str(p) => render_str(p, out),
        J::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                space(out, at);
                if i > 0 {
                    out.push(',');
                    space(out, at);
                }
                render(item, ws, at, out);
            }
            space(out, at);
            out.push(']');
        }
        J::Obj(members) => {
            out.push('{');
            for (i, (k, v)) in members.iter().enumerate() {
                space(out, at);
                if i > 0 {
                    out.push(',');
                    space(out, at);
                }
                render_str(k, out);
                space(out, at);
                out.push(':');
                space(out, at);
                render(v, ws, at, out);
            }
            space(out, at);
            out.push('}');
        }
    }
}

fn render_str(pieces: &[Piece], out: &mut String) {
    out.push('"');
    for p in pieces {
        match p {
            Piece::Lit(c) => out.push(*c),
            Piece::Short(c) => out.push_str(match c {
                '"' => "\\\"",
                '\\' => "\\\\",
                '/' => "\\/",
                '\u{8}' => "\\b",
                '\u{c}' => "\\f",
                '\n' => "\\n",
                '\r' => "\\r",
                _ => "\\t",
            }),
            Piece::U(c) => out.push_str(&format!("\\u{:04X}", *c as u32)),
            Piece::Pair(c) => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{u:04x}"));
                }
            }
            Piece::Lone(u) => out.push_str(&format!("\\u{u:04x}")),
        }
    }
    out.push('"');
}

fn render_text(j: &J, ws: &[u8]) -> String {
    let mut out = String::new();
    render(j, ws, &mut 0, &mut out);
    out
}

/// The oracle: what the relay must make of `j`, computed from the tree
/// (independently of the parser): the canonical text, or the first error in
/// document order (a duplicate key is found when its object closes).
fn expected(j: &J, depth: u32) -> Result<String, ValueError> {
    match j {
        J::Null => Ok("null".into()),
        J::Bool(b) => Ok(b.to_string()),
        J::Num(n) => Ok(n.clone()),
        J::Str(p) => Ok(quote(&decode_pieces(p)?)),
        J::Arr(items) => {
            if depth + 1 > MAX_VALUE_DEPTH {
                return Err(ValueError::TooDeep);
            }
            let parts: Result<Vec<String>, _> = items.iter().map(|i| expected(i, depth + 1)).collect();
            Ok(format!("[{}]", parts?.join(",")))
        }
        J::Obj(members) => {
            if depth + 1 > MAX_VALUE_DEPTH {
                return Err(ValueError::TooDeep);
            }
            let mut out: Vec<(String, String)> = Vec::new();
            for (k, v) in members {
                let key = decode_pieces(k)?;
                out.push((key, expected(v, depth + 1)?));
            }
            out.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            if let Some(w) = out.windows(2).find(|w| w[0].0 == w[1].0) {
                return Err(ValueError::DuplicateKey(w[0].0.clone()));
            }
            let parts: Vec<String> = out.into_iter().map(|(k, v)| format!("{}:{v}", quote(&k))).collect();
            Ok(format!("{{{}}}", parts.join(",")))
        }
    }
}

fn decode_pieces(pieces: &[Piece]) -> Result<String, ValueError> {
    let mut out = String::new();
    let mut i = 0;
    while let Some(p) = pieces.get(i) {
        match p {
            Piece::Lit(c) | Piece::Short(c) | Piece::U(c) | Piece::Pair(c) => out.push(*c),
            // Two "lone" escapes in a row may make a valid pair after all.
            Piece::Lone(high @ 0xd800..=0xdbff) => match pieces.get(i + 1) {
                Some(Piece::Lone(low @ 0xdc00..=0xdfff)) => {
                    let code = 0x10000 + ((u32::from(*high) - 0xd800) << 10) + (u32::from(*low) - 0xdc00);
                    out.push(char::from_u32(code).unwrap());
                    i += 1;
                }
                _ => return Err(ValueError::LoneSurrogate(0)),
            },
            Piece::Lone(_) => return Err(ValueError::LoneSurrogate(0)),
        }
        i += 1;
    }
    Ok(out)
}

/// serde_json's string escaping: the same minimal form the relay promises.
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// Same error kind, ignoring offsets.
fn same_kind(a: &ValueError, b: &ValueError) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
        && match (a, b) {
            (ValueError::DuplicateKey(x), ValueError::DuplicateKey(y)) => x == y,
            _ => true,
        }
}

/// Applies a few edits at character boundaries: deletions, insertions of
/// JSON-ish characters, truncation.
fn mutate(text: &str, edits: &[(u8, u16, char)]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for &(op, pos, c) in edits {
        let at = if chars.is_empty() { 0 } else { pos as usize % (chars.len() + 1) };
        match op % 4 {
            0 if at < chars.len() => {
                chars.remove(at);
            }
            1 | 2 => chars.insert(at, c),
            _ => chars.truncate(at),
        }
    }
    chars.into_iter().collect()
}

fn noise_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => prop::sample::select(vec!['{', '}', '[', ']', ',', ':', '"', '\\', 'u', '0', '9', 'e', '-', '+', '.', ' ', 'n', 't']),
        1 => any::<char>(),
    ]
}

fn edits() -> impl Strategy<Value = Vec<(u8, u16, char)>> {
    prop::collection::vec((any::<u8>(), any::<u16>(), noise_char()), 1..4)
}

// ---- values ----------------------------------------------------------------

/// Checks canonical() on arbitrary text against serde_json: both must agree
/// on what is JSON, except where the relay deliberately differs.
fn differential(text: &str) -> Result<(), TestCaseError> {
    let ours = canonical(text);
    let theirs = serde_json::from_str::<serde_json::Value>(text);
    match (&ours, &theirs) {
        (Ok(c), _) => {
            let again = canonical(c);
            prop_assert_eq!(again.as_ref(), Ok(c), "canonical text is a fixed point");
            match (&theirs, serde_json::from_str::<serde_json::Value>(c)) {
                (Ok(t), Ok(cv)) => prop_assert_eq!(t, &cv, "canonical text means what the input meant"),
                (Err(e), _) => prop_assert!(
                    e.to_string().contains("number out of range"),
                    "we accepted what serde_json refuses for another reason than number range: {e}"
                ),
                (Ok(_), Err(e)) => prop_assert!(false, "serde_json read the input but not our output: {e}"),
            }
        }
        (Err(e), Ok(_)) => prop_assert!(
            matches!(e, ValueError::DuplicateKey(_) | ValueError::TooDeep | ValueError::LoneSurrogate(_)),
            "we refused JSON that serde_json reads, as {e:?}"
        ),
        (Err(_), Err(_)) => {}
    }
    Ok(())
}

#[test]
fn generated_values_reach_their_canonical_form_or_the_expected_refusal() {
    let strategy = (prop_oneof![9 => json(), 1 => deep_json()], prop::collection::vec(any::<u8>(), 1..16));
    fuzz("values", 1, 30_000, strategy, |(j, ws)| {
        let text = render_text(&j, &ws);
        let want = expected(&j, 0);
        let got = canonical(&text);
        match (&want, &got) {
            (Ok(w), Ok(g)) => prop_assert_eq!(w, g),
            (Err(w), Err(g)) => prop_assert!(same_kind(w, g), "want {:?}, got {:?}", w, g),
            _ => prop_assert!(false, "want {:?}, got {:?} for {}", want, got, text),
        }
        differential(&text)
    });
}

#[test]
fn broken_values_never_panic_and_agree_with_serde_json() {
    let strategy = (json(), prop::collection::vec(any::<u8>(), 1..8), edits());
    fuzz("broken values", 2, 15_000, strategy, |(j, ws, edits)| {
        differential(&mutate(&render_text(&j, &ws), &edits))
    });
}

// ---- enqueue bodies ----------------------------------------------------------

/// A row as a generator sees it.
#[derive(Clone, Debug)]
struct GenRow {
    target: String,
    puts: Vec<(String, J)>,
    deletes: Vec<String>,
    extra_field: bool,
    /// `(delay_ms, not_before_ms)` as JSON number text, when present.
    delay: (Option<String>, Option<String>),
}

/// A delay field's number: in range, at and past the limit, negative,
/// fractional, past u64.
fn delay_number() -> impl Strategy<Value = String> {
    let max = durable_relay::core::MAX_DELAY_MS;
    prop_oneof![
        6 => (0u64..200_000).prop_map(|n| n.to_string()),
        2 => (max - 2..max + 3).prop_map(|n| n.to_string()),
        2 => (NOW_MS + max - 2..NOW_MS + max + 3).prop_map(|n| n.to_string()),
        1 => Just("-1".to_owned()),
        1 => Just("1.5".to_owned()),
        1 => Just("18446744073709551616".to_owned()),
        1 => Just("1e3".to_owned()),
    ]
}

/// The clock the fuzzed enqueues are planned at.
const NOW_MS: u64 = 1_000;

fn key_text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::collection::vec(prop::sample::select(vec!['k', 'e', 'y', '1', '2']), 1..4).prop_map(|c| c.into_iter().collect()),
        1 => Just(String::new()),
        1 => prop::collection::vec(any::<char>(), 1..8).prop_map(|c| c.into_iter().collect()),
        1 => (500usize..520).prop_map(|n| "k".repeat(n)),
    ]
}

fn gen_row() -> impl Strategy<Value = GenRow> {
    (
        target_name(),
        prop::collection::vec((key_text(), prop_oneof![9 => json(), 1 => deep_json()]), 0..4),
        prop::collection::vec(key_text(), 0..3),
        prop::bool::weighted(0.05),
        (proptest::option::weighted(0.2, delay_number()), proptest::option::weighted(0.2, delay_number())),
    )
        .prop_map(|(target, puts, deletes, extra_field, delay)| GenRow {
            target,
            puts,
            deletes,
            extra_field,
            delay,
        })
}

fn render_body(rows: &[GenRow], key: &Option<String>, ws: &[u8]) -> String {
    let mut out = String::from("{\"rows\":[");
    for (i, r) in rows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!("{{\"target\":{},\"puts\":[", quote(&r.target)));
        for (n, (k, v)) in r.puts.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(&format!("[{},", quote(k)));
            render(v, ws, &mut 0, &mut out);
            out.push(']');
        }
        let deletes: Vec<String> = r.deletes.iter().map(|k| quote(k)).collect();
        out.push_str(&format!("],\"deletes\":[{}]", deletes.join(",")));
        if r.extra_field {
            out.push_str(",\"ttl\":5");
        }
        if let Some(n) = &r.delay.0 {
            out.push_str(&format!(",\"delay_ms\":{n}"));
        }
        if let Some(n) = &r.delay.1 {
            out.push_str(&format!(",\"not_before_ms\":{n}"));
        }
        out.push('}');
    }
    out.push(']');
    if let Some(k) = key {
        out.push_str(&format!(",\"idempotency_key\":{}", quote(k)));
    }
    out.push('}');
    out
}

/// Codes an enqueue may be refused with before anything is written.
const ENQUEUE_CODES: &[&str] = &[
    "empty_body",
    "malformed_json",
    "invalid_request",
    "value_too_deep",
    "invalid_target",
    "no_rows",
    "too_many_rows",
    "request_too_large",
    "row_without_effects",
    "too_many_effects",
    "empty_key",
    "key_too_long",
    "value_too_large",
    "duplicate_key",
    "row_too_large",
    "invalid_value",
    "duplicate_object_key",
    "lone_surrogate",
    "delay_too_long",
    "conflicting_delay",
];

/// The due time the relay must give a clean row, from its delay fields as
/// written (`None`: it must be refused). Independent of `core::delay`.
fn expected_due(delay: &(Option<String>, Option<String>)) -> Option<u64> {
    let max = durable_relay::core::MAX_DELAY_MS;
    match (delay.0.as_deref().map(str::parse::<u64>), delay.1.as_deref().map(str::parse::<u64>)) {
        (None, None) => Some(0),
        (Some(Ok(ms)), None) if ms <= max => Some(if ms == 0 { 0 } else { NOW_MS + ms }),
        (None, Some(Ok(at))) if at <= NOW_MS + max => Some(if at <= NOW_MS { 0 } else { at }),
        _ => None,
    }
}

/// Sends accepted rows through the real delivery encoding: stored row,
/// decoded queued row, target batch on the wire, decoded batch. Returns the
/// effects as the target reads them.
/// What the targets read of accepted rows, and each row's planned due time.
type Delivered = (Vec<Effects>, Vec<u64>);

/// `None` when planning refuses a delay (the only refusal planning may add).
fn through_the_wire(enc: &durable_relay::core::EncodedRows) -> Result<Option<Delivered>, TestCaseError> {
    let plan = match plan_encoded(41, NOW_MS, enc, &Capacity::with_defaults(0, 0)) {
        Ok(plan) => plan,
        Err(e) if e.code() == "delay_too_long" => return Ok(None),
        Err(e) => return Err(TestCaseError::fail(format!("planning failed: {e}"))),
    };
    let due = plan.rows.iter().map(|r| r.due_ms).collect();
    let mut out = Vec::new();
    for stored in &plan.rows {
        let row = QueuedRow::decode(stored).map_err(|e| TestCaseError::fail(format!("stored row: {e}")))?;
        let call = TargetCall { group: 0, target: row.target.clone(), seqs: vec![row.seq], bytes: row.bytes };
        let id = durable_relay::core::SourceId::derive("fuzz", "src");
        let wire = encode_request(&Name::new("src").unwrap(), &id, &call, std::slice::from_ref(&row));
        let batch = decode_request(&wire).map_err(|e| TestCaseError::fail(format!("batch: {e}")))?;
        prop_assert_eq!(batch.rows.len(), 1);
        prop_assert_eq!(batch.source_id.as_ref(), Some(&id));
        out.push(batch.rows[0].effects.clone());
    }
    Ok(Some((out, due)))
}

#[test]
fn generated_enqueue_bodies_are_refused_with_a_code_or_delivered_exactly() {
    let strategy = (
        prop::collection::vec(gen_row(), 0..5),
        proptest::option::of(key_text()),
        prop::collection::vec(any::<u8>(), 1..8),
        proptest::option::weighted(0.3, edits()),
    );
    fuzz("enqueue bodies", 3, 25_000, strategy, |(rows, key, ws, edits)| {
        let clean = render_body(&rows, &key, &ws);
        let text = edits.as_ref().map_or_else(|| clean.clone(), |e| mutate(&clean, e));
        let request = match decode_enqueue(&text) {
            Ok(r) => r,
            Err(e) => {
                prop_assert!(ENQUEUE_CODES.contains(&e.code().as_str()), "unknown code {}", e.code());
                return Ok(());
            }
        };
        if let Some(k) = &request.idempotency_key {
            let _ = durable_relay::core::dedup::validate_key(k);
        }
        let encoded = match encode_rows(&request.rows) {
            Ok(enc) => enc,
            Err(e) => {
                prop_assert!(ENQUEUE_CODES.contains(&e.code().as_str()), "unknown code {}", e.code());
                if edits.is_none() {
                    // A refusal of a clean body must be explained by the oracle.
                    let bad_value = rows.iter().flat_map(|r| &r.puts).any(|(_, v)| expected(v, 0).is_err());
                    prop_assert!(bad_value || e.code() != "invalid_value", "{e}");
                }
                return Ok(());
            }
        };
        let Some((delivered, due)) = through_the_wire(&encoded)? else {
            if edits.is_none() {
                prop_assert!(rows.iter().any(|r| expected_due(&r.delay).is_none()), "a delay was refused");
            }
            return Ok(());
        };
        for (effects, row) in delivered.iter().zip(&request.rows) {
            for ((k, v), (k2, raw)) in effects.puts.iter().zip(&row.puts) {
                prop_assert_eq!(k, k2);
                prop_assert_eq!(
                    Ok(v.as_str().to_owned()),
                    canonical(raw.as_str()),
                    "a value changed on the way"
                );
            }
            prop_assert_eq!(&effects.deletes, &row.deletes);
        }
        if edits.is_none() {
            // Clean bodies: every value arrives exactly as the oracle says,
            // and every row is due when its delay says (the rows of one
            // enqueue are planned with no hold from earlier rows).
            let want: Vec<Option<u64>> = rows.iter().map(|r| expected_due(&r.delay)).collect();
            prop_assert!(
                want.iter().all(Option::is_some),
                "a delay the oracle refuses was accepted: {:?}",
                rows
            );
            prop_assert_eq!(due, want.into_iter().flatten().collect::<Vec<_>>());
            for (effects, row) in delivered.iter().zip(&rows) {
                for ((_, v), (_, j)) in effects.puts.iter().zip(&row.puts) {
                    prop_assert_eq!(Ok(v.as_str().to_owned()), expected(j, 0));
                }
            }
        }
        Ok(())
    });
}

// ---- target batches ------------------------------------------------------------

/// A batch's `source_id` member as a sender might write it: none (a sender
/// older than ids), a Durable Object id, or a malformed one (a wrong
/// length, a character outside lowercase hex, not a string).
fn source_id_member() -> impl Strategy<Value = String> {
    let hex = prop::collection::vec(prop::sample::select(b"0123456789abcdef".to_vec()), 64)
        .prop_map(|b| String::from_utf8(b).unwrap());
    prop_oneof![
        2 => Just(String::new()),
        3 => hex.prop_map(|id| format!(r#""source_id":"{id}","#)),
        1 => "[0-9a-f]{0,70}".prop_map(|id| format!(r#""source_id":"{id}","#)),
        1 => "[0-9a-fA-Zé ]{64}".prop_map(|id| format!(r#""source_id":{},"#, quote(&id))),
        1 => prop_oneof![Just("7"), Just("null"), Just("[]")].prop_map(|v| format!(r#""source_id":{v},"#)),
    ]
}

/// Whether a `source_id` member (as [`source_id_member`] writes it) is one
/// a target must accept: absent, or 64 lowercase hex digits. A `null` is
/// refused: no sender writes one.
fn valid_id_member(member: &str) -> bool {
    let Some(value) = member.strip_prefix(r#""source_id":"#).and_then(|m| m.strip_suffix(',')) else {
        return true;
    };
    let Some(id) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) else { return false };
    id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn batch_text() -> impl Strategy<Value = String> {
    let row = (
        0u64..20,
        prop::collection::vec((key_text(), json()), 0..3),
        prop::collection::vec(key_text(), 0..2),
    );
    let clean = (
        target_name(),
        source_id_member(),
        prop::collection::vec(row, 0..6),
        prop::collection::vec(any::<u8>(), 1..4),
    )
        .prop_map(|(source, id, rows, ws)| {
            let rows: Vec<String> = rows
                .iter()
                .map(|(seq, puts, deletes)| {
                    let puts: Vec<String> =
                        puts.iter().map(|(k, v)| format!("[{},{}]", quote(k), render_text(v, &ws))).collect();
                    let deletes: Vec<String> = deletes.iter().map(|k| quote(k)).collect();
                    format!(
                        r#"{{"seq":{seq},"effects":{{"puts":[{}],"deletes":[{}]}}}}"#,
                        puts.join(","),
                        deletes.join(",")
                    )
                })
                .collect();
            format!(r#"{{"source":{},{id}"rows":[{}]}}"#, quote(&source), rows.join(","))
        })
        .boxed();
    prop_oneof![3 => clean.clone(), 2 => (clean, edits()).prop_map(|(t, e)| mutate(&t, &e)),
        1 => prop::collection::vec(any::<char>(), 0..64).prop_map(|c| c.into_iter().collect())]
}

#[test]
fn generated_apply_batches_are_refused_with_a_code_or_valid() {
    fuzz("apply batches", 4, 15_000, batch_text(), |text| {
        match decode_request(&text) {
            Ok(batch) => {
                prop_assert!(!batch.rows.is_empty());
                prop_assert!(batch.rows.windows(2).all(|w| w[0].seq < w[1].seq), "rows ascend");
                prop_assert!(batch.rows.iter().all(|r| r.effects.validate().is_ok()));
                if let Some(id) = &batch.source_id {
                    prop_assert!(valid_id_member(&format!(r#""source_id":"{id}","#)), "accepted id {}", id);
                }
            }
            Err(e) => prop_assert!([
                "malformed_batch",
                "empty_batch",
                "batch_too_large",
                "bad_sequence",
                "bad_row",
                "invalid_source_id"
            ]
            .contains(&e.code().as_str())),
        }
        Ok(())
    });
}

/// A batch whose `source_id` is malformed is refused, whatever its rows, and
/// writes nothing at the target: a real inbox keeps no key and no watermark.
#[test]
fn generated_batches_with_a_malformed_source_id_are_refused_and_write_nothing() {
    use durable_relay::core::NoHook;
    use durable_relay::sim::SqliteSql;
    use durable_relay::{ApplyFailure, Inbox};
    let strategy = (source_id_member(), prop::collection::vec(key_text(), 1..4));
    fuzz("apply batches with ids", 10, 2_000, strategy, |(member, keys)| {
        let deletes: Vec<String> = keys.iter().map(|k| quote(k)).collect();
        let puts: Vec<String> = keys.iter().map(|k| format!("[{},1]", quote(k))).collect();
        let text = format!(
            r#"{{"source":"s",{member}"rows":[{{"seq":1,"effects":{{"puts":[{}]}}}},{{"seq":2,"effects":{{"deletes":[{}]}}}}]}}"#,
            puts.join(","),
            deletes.join(",")
        );
        let inbox = Inbox::open(SqliteSql::memory().unwrap()).unwrap();
        match inbox.apply_body(&text, &NoHook) {
            Ok(_) => prop_assert!(valid_id_member(&member), "accepted {}", member),
            Err(ApplyFailure::Rejected(e)) => {
                // Keys drawn twice make a row invalid; only the id is in question here.
                if e.code() != "bad_row" {
                    prop_assert!(!valid_id_member(&member), "refused a good id {}: {}", member, e);
                    let code = e.code();
                    prop_assert!(code == "invalid_source_id" || code == "malformed_batch", "{}", code);
                    if code == "invalid_source_id" {
                        prop_assert!(
                            e.to_string().contains("source_id"),
                            "the message names the field: {}",
                            e
                        );
                    }
                }
                prop_assert!(inbox.watermarks().unwrap().is_empty(), "a refused batch wrote a watermark");
                prop_assert!(inbox.keys("", "", 10).unwrap().keys.is_empty(), "a refused batch wrote a key");
            }
            Err(other) => prop_assert!(false, "{:?}", other),
        }
        Ok(())
    });
}

#[test]
fn generated_request_lines_route_or_get_a_4xx_and_routes_survive_forwarding() {
    let strategy = (
        prop::sample::select(methods()),
        prop::collection::vec(segment(), 0..6),
        proptest::option::of(query_text()),
    );
    fuzz("request lines", 5, 15_000, strategy, |(method, segs, query)| {
        let Some(url) = request_url(&segs, query.as_deref()) else { return Ok(()) };
        let check = |e: &durable_relay::protocol::Refusal| (400..500).contains(&e.status);
        match SourceOp::from_url(method, &url) {
            Ok(op) => {
                let inner = worker::Url::parse(&format!("https://relay{}", op.path())).unwrap();
                prop_assert_eq!(op.method(), method);
                prop_assert_eq!(SourceOp::from_url(method, &inner).ok(), Some(op), "a built path re-parses");
            }
            Err(e) => prop_assert!(check(&e), "{} {}: {:?}", method, url, e),
        }
        match TargetOp::from_url(method, &url) {
            Ok(op) => {
                let inner = worker::Url::parse(&format!("https://relay{}", op.path())).unwrap();
                prop_assert_eq!(op.method(), method);
                prop_assert_eq!(TargetOp::from_url(method, &inner).ok(), Some(op), "a built path re-parses");
            }
            Err(e) => prop_assert!(check(&e), "{} {}: {:?}", method, url, e),
        }
        Ok(())
    });
}

// ---- keys, headers, persisted state ---------------------------------------------

#[test]
fn generated_keys_and_headers_are_judged_without_panicking() {
    let strategy =
        (key_text(), proptest::option::of(prop::collection::vec(any::<char>(), 0..40)), target_name());
    fuzz("keys and headers", 6, 5_000, strategy, |(key, header, token)| {
        let verdict = durable_relay::core::dedup::validate_key(&key);
        prop_assert_eq!(verdict.is_ok(), !key.is_empty() && key.len() <= 128);
        let header: Option<String> = header.map(|c| c.into_iter().collect());
        let ok = durable_relay::http::check_bearer(header.as_deref(), &token).is_ok();
        let want =
            header.as_deref().and_then(|h| h.strip_prefix("Bearer ")).map(str::trim) == Some(token.as_str());
        prop_assert_eq!(ok, want && !token.is_empty());
        Ok(())
    });
}

/// An oracle for the version-00 `traceparent` form written apart from the
/// parser: four dash-separated fields of fixed widths, lowercase hex, version
/// `00`, neither id all zeros.
fn traceparent_ok(text: &str) -> bool {
    let hex = |s: &str| s.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'));
    let fields: Vec<&str> = text.split('-').collect();
    fields.len() == 4
        && fields.iter().zip([2, 32, 16, 2]).all(|(f, n)| f.len() == n && hex(f))
        && fields[0] == "00"
        && fields[1].chars().any(|c| c != '0')
        && fields[2].chars().any(|c| c != '0')
}

#[test]
fn generated_traceparents_are_accepted_exactly_in_the_version_00_form() {
    let hex = |n: usize| {
        prop::collection::vec(
            prop_oneof![8 => proptest::char::range('0', '9'), 8 => proptest::char::range('a', 'f'), 1 => Just('0'), 1 => proptest::char::range('A', 'F'), 1 => Just('-'), 1 => any::<char>()],
            n..=n,
        )
    };
    let text = prop_oneof![
        4 => (prop_oneof![Just("00".to_owned()), "[0-9a-fA-F]{2}"], hex(32), hex(16), "[0-9a-f]{2}")
            .prop_map(|(v, t, p, f)| format!("{v}-{}-{}-{f}", t.into_iter().collect::<String>(), p.into_iter().collect::<String>())),
        1 => prop::collection::vec(any::<char>(), 0..70).prop_map(|c| c.into_iter().collect::<String>()),
        1 => (Just("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned()), edits())
            .prop_map(|(t, e)| mutate(&t, &e)),
    ];
    fuzz("traceparents", 8, 5_000, text, |text| {
        let parsed = durable_relay::core::Traceparent::parse(&text);
        prop_assert_eq!(parsed.is_ok(), traceparent_ok(&text), "{:?} judged {:?}", text, parsed);
        if let Ok(t) = parsed {
            prop_assert_eq!(t.as_str(), text.as_str());
        }
        Ok(())
    });
}

#[test]
fn corrupt_persisted_state_is_reported_not_trusted() {
    let text = prop_oneof![
        prop::collection::vec(any::<char>(), 0..40).prop_map(|c| c.into_iter().collect::<String>()),
        (json(), edits()).prop_map(|(j, e)| mutate(&render_text(&j, &[0]), &e)),
        Just(r#"{"v":1,"generation":0,"cycle_end":3,"cursor":4,"blocked":[],"idle_fires":0}"#.to_owned()),
    ];
    fuzz("persisted state", 7, 5_000, (text, any::<u64>(), target_name()), |(text, seq, target)| {
        if let Ok(scan) = ScanState::decode(&text) {
            prop_assert!(scan.check().is_ok());
        }
        let stored = StoredRow { seq, target, at_ms: 0, due_ms: 0, body: text };
        if let Ok(row) = QueuedRow::decode(&stored) {
            prop_assert!(row.seq >= 1 && Effects::decode(&stored.body).is_ok());
        }
        Ok(())
    });
}

// ---- partition routing: fence headers, adopt and claim bodies, maps ------------

/// An oracle for the fence headers, written apart from the parser.
fn fence_ok(epoch: Option<&str>, map: Option<&str>, gate: Option<&str>) -> Option<(u64, u64, bool)> {
    let epoch = match epoch {
        None => 0,
        Some(t) => match t.trim().parse::<u64>() {
            Ok(e) if (1..=(1u64 << 53) - 1).contains(&e) => e,
            _ => return None,
        },
    };
    let map = match map {
        None if epoch == 0 => 0,
        None => return None,
        Some(t) => t.trim().parse::<u64>().ok()?,
    };
    let gate = gate.is_some_and(|g| g.trim() == "1");
    if (gate || map != 0) && epoch == 0 {
        return None;
    }
    Some((epoch, map, gate))
}

fn header_text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(prop_oneof![
        Just("1".to_owned()),
        Just(" 2 ".to_owned()),
        Just("0".to_owned()),
        Just("9007199254740991".to_owned()),
        Just("9007199254740992".to_owned()),
        Just("18446744073709551615".to_owned()),
        Just("-1".to_owned()),
        Just("".to_owned()),
        any::<u64>().prop_map(|n| n.to_string()),
        prop::collection::vec(any::<char>(), 0..12).prop_map(|c| c.into_iter().collect::<String>()),
    ])
}

/// Partition map JSON: valid-looking maps, their mutations, and noise.
fn map_text() -> impl Strategy<Value = String> {
    let count = prop_oneof![0u32..70, Just(64), Just(65), Just(u32::MAX)];
    let from = prop_oneof![
        Just(String::new()),
        count.clone().prop_map(|n| format!(r#","from":{n}"#)),
        prop::collection::vec(count.clone(), 0..7).prop_map(|v| format!(
            r#","from":[{}]"#,
            v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
        )),
        Just(r#","from":"2""#.to_owned()),
        Just(r#","from":null"#.to_owned()),
        Just(r#","from":"plain""#.to_owned()),
        Just(r#","from":["plain",2]"#.to_owned()),
        Just(r#","from":"Plain""#.to_owned()),
    ];
    let count = prop_oneof![4 => count.prop_map(|n| n.to_string()), 1 => Just(r#""plain""#.to_owned())];
    let epoch = prop_oneof![
        Just("1".to_owned()),
        Just("0".to_owned()),
        Just("9007199254740992".to_owned()),
        Just("-1".to_owned()),
        Just("1.5".to_owned())
    ];
    let valid = (count, epoch, from).prop_map(|(p, e, f)| format!(r#"{{"partitions":{p},"epoch":{e}{f}}}"#));
    prop_oneof![
        4 => valid.clone(),
        2 => (valid, edits()).prop_map(|(t, e)| mutate(&t, &e)),
        1 => prop::collection::vec(any::<char>(), 0..40).prop_map(|c| c.into_iter().collect::<String>()),
    ]
}

/// An oracle for the key ticket headers, written apart from the parser.
fn ticket_ok(ticket: Option<&str>, digest: Option<&str>) -> Option<Option<(u64, u32)>> {
    let (t, d) = match (ticket, digest) {
        (None, None) => return Some(None),
        (Some(t), Some(d)) => (t.trim(), d.trim()),
        _ => return None,
    };
    let (g, a) = t.split_once('.')?;
    let g: u64 = g.parse().ok().filter(|g| *g < (1u64 << 53))?;
    let a: u32 = a.parse().ok().filter(|a| *a >= 1)?;
    let hex = d.len() == 64 && d.chars().all(|c| c.is_ascii_hexdigit());
    hex.then_some(Some((g, a)))
}

fn ticket_text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(prop_oneof![
        Just("1.1".to_owned()),
        Just(" 1800000000000.2 ".to_owned()),
        Just("1.0".to_owned()),
        Just("9007199254740992.1".to_owned()),
        Just("1.4294967296".to_owned()),
        Just("1".to_owned()),
        Just(".".to_owned()),
        Just("a".repeat(64)),
        Just("A0".repeat(32)),
        Just("g".repeat(64)),
        (any::<u64>(), any::<u32>()).prop_map(|(g, a)| format!("{g}.{a}")),
        prop::collection::vec(any::<char>(), 0..12).prop_map(|c| c.into_iter().collect::<String>()),
    ])
}

/// The router steps' bodies around `map_json` and `key`: a malformed
/// adopt body is a 4xx, and each key body is exactly one step's.
fn router_bodies_are_judged(map_json: &str, key: &str) -> Result<(), TestCaseError> {
    use durable_relay::durable::source::{AdoptBody, KeyBody, PlainKeyBody, SealBody};
    for body in [format!(r#"{{"map":{map_json}}}"#), map_json.to_owned()] {
        if let Err(e) = durable_relay::http::parse_json::<AdoptBody>(&body) {
            prop_assert!((400..500).contains(&e.status));
        }
    }
    let k = quote(key);
    for body in [
        format!(r#"{{"key":{k},"digest":"d","reach":[0,"plain",63]}}"#),
        format!(r#"{{"key":{k},"digest":"d","ticket":{{"gen_ms":1,"attempt":2}}}}"#),
        format!(r#"{{"key":{k},"digest":"d"}}"#),
    ] {
        let oks = [
            durable_relay::http::parse_json::<KeyBody>(&body).is_ok(),
            durable_relay::http::parse_json::<SealBody>(&body).is_ok(),
            durable_relay::http::parse_json::<PlainKeyBody>(&body).is_ok(),
        ];
        prop_assert_eq!(oks.iter().filter(|ok| **ok).count(), 1, "each body is exactly one op's: {}", body);
    }
    Ok(())
}

#[test]
fn generated_partition_routing_input_is_judged_without_panicking() {
    use durable_relay::core::{home, key_home, Layout, Part, PartitionMap, KEY_HOMES};
    use durable_relay::durable::source::{parse_fence, parse_ticket};
    let headers = (header_text(), header_text(), header_text(), ticket_text(), ticket_text());
    let strategy = (headers, map_text(), target_name(), key_text());
    fuzz(
        "partition routing",
        9,
        10_000,
        strategy,
        |((epoch, map, gate, ticket, digest), map_json, target, key)| {
            let fence = parse_fence(epoch.as_deref(), map.as_deref(), gate.as_deref());
            let want = fence_ok(epoch.as_deref(), map.as_deref(), gate.as_deref());
            prop_assert_eq!(fence.as_ref().ok().map(|f| (f.epoch, f.map_id, f.gate)), want);
            if let Err(e) = fence {
                prop_assert_eq!(e.code, "invalid_partition");
            }
            let parsed_ticket = parse_ticket(ticket.as_deref(), digest.as_deref());
            let want = ticket_ok(ticket.as_deref(), digest.as_deref());
            let got = parsed_ticket.as_ref().ok().map(|t| t.as_ref().map(|(t, _)| (t.gen_ms, t.attempt)));
            prop_assert_eq!(got, want);
            if let Err(e) = parsed_ticket {
                prop_assert_eq!(e.code, "invalid_partition");
            }
            router_bodies_are_judged(&map_json, &key)?;
            prop_assert!(key_home(&key) < KEY_HOMES);
            let Ok(parsed) = serde_json::from_str::<PartitionMap>(&map_json) else { return Ok(()) };
            let Ok(name) = Name::new(target.as_str()) else { return Ok(()) };
            if parsed.validate(&Name::new("orders").unwrap()).is_err() {
                return Ok(());
            }
            let route = parsed.route(&name);
            let parts = parsed.parts();
            match parsed.partitions {
                Layout::Count(n) => prop_assert_eq!(route.home, Part::Index(home(&name, n))),
                Layout::Plain => prop_assert_eq!(route.home, Part::Plain),
            }
            prop_assert!(
                route.chain().iter().all(|p| parts.contains(p)),
                "every step is an object of the map"
            );
            prop_assert!(route.gates.last() != Some(&route.home), "the home is never its own last gate");
            for p in route.chain() {
                prop_assert!(parsed.reaches(&name, p));
            }
            Ok(())
        },
    );
}

// ---- regression corpus: inputs earlier runs or reports found ---------------------

#[test]
fn regression_a_number_past_f64_is_carried_not_a_crash() {
    let r = decode_enqueue(r#"{"rows":[{"target":"a","puts":[["k",1e400]]}]}"#).unwrap();
    let enc = encode_rows(&r.rows).unwrap();
    assert_eq!(enc.rows[0].1, r#"{"puts":[["k",1e400]],"deletes":[]}"#);
}

#[test]
fn regression_a_big_integer_is_carried_digit_for_digit() {
    let r =
        decode_enqueue(r#"{"rows":[{"target":"a","puts":[["k",123456789012345678901234567890]]}]}"#).unwrap();
    let (delivered, _) = through_the_wire(&encode_rows(&r.rows).unwrap()).unwrap().unwrap();
    assert_eq!(delivered[0].puts[0].1.as_str(), "123456789012345678901234567890");
}

#[test]
fn regression_nesting_of_130_is_refused_and_64_accepted() {
    let body = |n: usize| {
        format!(r#"{{"rows":[{{"target":"a","puts":[["k",{}{}]]}}]}}"#, "[".repeat(n), "]".repeat(n))
    };
    assert_eq!(decode_enqueue(&body(130)).unwrap_err().code(), "value_too_deep");
    assert_eq!(decode_enqueue(&body(65)).unwrap_err().code(), "value_too_deep");
    assert!(encode_rows(&decode_enqueue(&body(64)).unwrap().rows).is_ok());
    // Deep inside a shallow envelope position, the value itself is judged.
    let nested = format!(
        r#"{{"rows":[{{"target":"a","puts":[["k",{{"a":{}1{}}}]]}}]}}"#,
        "[".repeat(64),
        "]".repeat(64)
    );
    let request = decode_enqueue(&nested).unwrap_err();
    assert_eq!(request.code(), "value_too_deep");
}

#[test]
fn regression_a_parked_page_after_past_the_safe_range_is_a_400() {
    let url = worker::Url::parse("https://relay/parked/t?after=9007199254740993").unwrap();
    assert_eq!(SourceOp::from_url("GET", &url).unwrap_err().status, 400);
}

#[test]
fn regression_escaped_nul_and_astral_characters_survive() {
    let r = decode_enqueue(r#"{"rows":[{"target":"a","puts":[["k","a\u0000b\ud83d\ude00"]]}]}"#).unwrap();
    let (delivered, _) = through_the_wire(&encode_rows(&r.rows).unwrap()).unwrap().unwrap();
    assert_eq!(delivered[0].puts[0].1.as_str(), "\"a\\u0000b\u{1F600}\"");
}
