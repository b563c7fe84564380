//! Every listing page is bounded in bytes as well as in rows: parked rows,
//! keys and watermarks, at and past the edge of [`MAX_PAGE_BYTES`], through
//! the shipped SQL (the simulator's SQLite and the inbox directly). A page
//! exactly at the budget holds its rows, one byte over cuts the last, a row
//! larger than the budget is answered alone, and `next` is null exactly on
//! the last page.

use durable_relay_sql::core::{
    json_bytes, EnqueueRow, Name, RelayBudget, SourceId, MAX_PAGE_BYTES, MAX_PARKED_ROWS_PER_PAGE,
    MAX_WATERMARKS_PER_PAGE,
};
use durable_relay_sql::sim::{Sim, SqliteSql};
use durable_relay_sql::{Inbox, ParkedPage};
use serde_json::json;

const S: &str = "src";
const BUDGET: u64 = MAX_PAGE_BYTES as u64;
/// Characters per value: under the 64 KiB a value may hold.
const CHUNK: usize = 60_000;

/// A row to `target` whose values hold `chars` characters in all.
fn row_of(target: &str, chars: usize) -> EnqueueRow {
    let puts = (0..chars.div_ceil(CHUNK))
        .map(|i| (format!("k{i:02}"), json!("x".repeat(CHUNK.min(chars - i * CHUNK)))))
        .collect();
    EnqueueRow::new(Name::new(target).unwrap(), puts, vec![])
}

fn page(sim: &Sim, target: &str, after: u64) -> ParkedPage {
    let target = Name::new(target).unwrap();
    sim.with_relay(S, |r| r.parked_page(&target, after, MAX_PARKED_ROWS_PER_PAGE)).unwrap()
}

/// The page's rows as encoded, separators included.
fn rows_bytes(page: &ParkedPage) -> u64 {
    page.rows.iter().map(json_bytes).sum::<u64>() + page.rows.len().saturating_sub(1) as u64
}

fn seqs(page: &ParkedPage) -> Vec<u64> {
    page.rows.iter().map(|r| r.seq).collect()
}

/// Parks `target`'s rows: a first of `first` characters, then one sized so
/// the two with their separator are `BUDGET + over` bytes, then a small one.
fn park_pair(sim: &mut Sim, target: &str, first: usize, over: u64) {
    sim.fail_target_permanently(target);
    sim.enqueue(S, vec![row_of(target, first)]).unwrap();
    sim.fire(S, RelayBudget::default());
    let one = json_bytes(&page(sim, target, 0).rows[0]);
    let second = first as u64 + (BUDGET + over - 1 - 2 * one);
    sim.enqueue(S, vec![row_of(target, second as usize)]).unwrap();
    sim.enqueue(S, vec![row_of(target, 10)]).unwrap();
    sim.fire(S, RelayBudget::default());
}

#[test]
fn a_parked_page_exactly_at_the_budget_holds_both_rows_and_one_byte_over_cuts_the_second() {
    let mut sim = Sim::new(30);
    park_pair(&mut sim, "at", 520_000, 0);
    let first = page(&sim, "at", 0);
    let (a, b) = (first.rows[0].seq, first.rows[1].seq);
    assert_eq!(rows_bytes(&first), BUDGET, "two rows and a separator, exactly the budget");
    assert_eq!((first.rows.len(), first.next), (2, Some(b)));
    let last = page(&sim, "at", b);
    assert_eq!((last.rows.len(), last.next), (1, None), "the last page: next is null");

    park_pair(&mut sim, "over", 520_000, 1);
    let first = page(&sim, "over", 0);
    assert_eq!(seqs(&first).len(), 1, "one byte over: the second row waits for the next page");
    assert!(first.next.is_some());
    let second = page(&sim, "over", first.next.unwrap());
    assert_eq!(second.rows.len(), 2, "the second row and the small one");
    assert_eq!(second.next, None);
    assert!(a < b);
}

#[test]
fn a_parked_row_larger_than_the_budget_is_answered_alone() {
    let mut sim = Sim::new(31);
    sim.fail_target_permanently("big");
    // The largest row a source accepts, at a clock of today's digits, with
    // its page framing, is over the budget.
    sim.advance(1_700_000_000_000);
    let (mut fits, mut refused) = (1_000_000, 1_048_576);
    while refused - fits > 1 {
        let mid = (fits + refused) / 2;
        if durable_relay_sql::core::encode_rows(&[row_of("big", mid)]).is_ok() {
            fits = mid;
        } else {
            refused = mid;
        }
    }
    let seq = sim.enqueue(S, vec![row_of("big", fits)]).unwrap()[0];
    sim.enqueue(S, vec![row_of("big", 10)]).unwrap();
    sim.fire(S, RelayBudget::default());
    let first = page(&sim, "big", 0);
    assert_eq!(seqs(&first), [seq], "alone");
    assert!(rows_bytes(&first) > BUDGET, "{} bytes: over the budget", rows_bytes(&first));
    assert_eq!(first.next, Some(seq));
    let rest = page(&sim, "big", seq);
    assert_eq!((rest.rows.len(), rest.next), (1, None));
}

#[test]
fn key_pages_of_large_values_stay_within_the_budget_and_list_every_key_once() {
    let mut sim = Sim::new(32);
    let value = "v".repeat(64 * 1024 - 2);
    for i in 0..40 {
        sim.put(S, "kv", &format!("key{i:03}"), json!(value)).unwrap();
    }
    assert!(sim.run_until_idle(S, RelayBudget::default(), 100).drained);
    let (mut after, mut seen, mut pages) = (String::new(), Vec::new(), 0);
    loop {
        let page = sim.with_target("kv", |i| i.keys("key", &after, 1_000)).unwrap();
        let bytes: u64 = page.keys.iter().map(json_bytes).sum::<u64>() + page.keys.len() as u64 - 1;
        assert!(bytes <= BUDGET, "a keys page of {bytes} bytes");
        let one = json_bytes(&page.keys[0]);
        pages += 1;
        seen.extend(page.keys.iter().map(|k| k.key.clone()));
        match page.next {
            Some(next) => {
                assert!(bytes + 1 + one > BUDGET, "the page stopped before its budget");
                after = next;
            }
            None => break,
        }
    }
    let want: Vec<String> = (0..40).map(|i| format!("key{i:03}")).collect();
    assert_eq!(seen, want, "every key once, in order");
    assert_eq!(pages, 3, "40 values of 64 KiB: 15 a page");
    let full = sim.with_target("kv", |i| i.keys("key", "", 40)).unwrap();
    assert_eq!(full.keys.len(), 15);
    let exact = sim.with_target("kv", |i| i.keys("key", "key029", 10)).unwrap();
    assert_eq!((exact.keys.len(), exact.next), (10, None), "a last page exactly at its limit: no next");
}

#[test]
fn watermarks_page_by_limit_and_cursor_through_legacy_and_identified_rows() {
    let inbox = Inbox::open(SqliteSql::memory().unwrap()).unwrap();
    for i in 0..1_150u64 {
        let id = SourceId::derive("class", &format!("s{i}"));
        inbox.set_watermark(&format!("s{i:04}"), Some(&id), i + 1).unwrap();
    }
    inbox.set_watermark("s0500", None, 7).unwrap();
    let (mut after, mut seen, mut sizes) = (None::<(Name, Option<SourceId>)>, Vec::new(), Vec::new());
    loop {
        let page = inbox
            .watermarks_page(after.as_ref().map(|(n, id)| (n, id.as_ref())), MAX_WATERMARKS_PER_PAGE)
            .unwrap();
        sizes.push(page.watermarks.len());
        seen.extend(page.watermarks.iter().map(|w| (w.source.clone(), w.source_id.clone())));
        let Some(next) = page.next else { break };
        let (source, id) = match next.split_once('/') {
            Some((s, id)) => (s.to_owned(), Some(SourceId::new(id).unwrap())),
            None => (next.clone(), None),
        };
        after = Some((Name::new(source).unwrap(), id));
    }
    assert_eq!(sizes, [500, 500, 151], "1,151 rows in three pages");
    let all: Vec<_> = inbox.watermarks().unwrap().into_iter().map(|w| (w.source, w.source_id)).collect();
    assert_eq!(seen, all, "every row once, in order");
    // A cursor on a legacy row continues with that name's identified rows.
    let legacy = Name::new("s0500").unwrap();
    let page = inbox.watermarks_page(Some((&legacy, None)), 1).unwrap();
    assert_eq!(page.watermarks[0].source, "s0500");
    assert!(page.watermarks[0].source_id.is_some());
    let last = Name::new("s1149").unwrap();
    let id = SourceId::derive("class", "s1149");
    let end = inbox.watermarks_page(Some((&last, Some(&id))), 5).unwrap();
    assert_eq!((end.watermarks.len(), end.next), (0, None));
}
