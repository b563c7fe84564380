//! The promises the explorer holds every sequence to, each named as the
//! book names it (docs/partitioned-sources.md, "The protocol"):
//!
//! - **one holder**: at every step, at most one object holds rows (queued
//!   or parked) for any target, so no target's rows are delivered from two
//!   objects at once (checked after every action);
//! - **once**: no row is applied twice; every row of an answered request is
//!   applied exactly once, at the position the answer gave;
//! - **a retry answers what was committed**: an attempt that starts after
//!   an earlier one was answered answers `duplicate` with the same
//!   positions;
//! - **order by answer**: when request A was answered before request B was
//!   first sent, every row of A for a target is applied before every row
//!   of B for it; a request's own rows for a target in request order;
//! - **one content per key**: rows of at most one request per key apply;
//! - **a refusal writes nothing**: a request whose every attempt was
//!   refused (none crashed) applies nothing;
//! - **retries end**: a keyed request retried while the world settles is
//!   answered, or refused as a conflict when its key names other content
//!   whose rows applied;
//! - **the audit holds and everything drains** (the simulator's audit:
//!   every committed row arrives once, in order per object and target).

use std::collections::{BTreeMap, BTreeSet};

use super::scenario::row_of;
use super::{Attempt, Run};
use crate::core::{EnqueueRefusal, Part};
use crate::partition::RoutedEnqueue;

/// **One holder**, checked after every action.
pub(crate) fn single_holder(run: &Run<'_>) -> Result<(), String> {
    let mut holders: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, src) in run.sim.world.sources.borrow().iter() {
        let held = src.relay.outbox().targets_held().map_err(|e| e.to_string())?;
        for t in held {
            holders.entry(t).or_default().push(name.to_string());
        }
    }
    match holders.iter().find(|(_, objects)| objects.len() > 1) {
        Some((t, objects)) => Err(format!("one holder: {t} has rows at {objects:?} at once")),
        None => Ok(()),
    }
}

/// Where each applied value came from, in the order its target applied it.
struct Seen {
    /// value -> (target, object, seq, index in the target's list), every time
    /// it was applied.
    at: BTreeMap<u64, Vec<(String, String, u64, usize)>>,
}

fn seen(run: &Run<'_>) -> Seen {
    let mut at: BTreeMap<u64, Vec<(String, String, u64, usize)>> = BTreeMap::new();
    for (target, list) in run.applied.borrow().iter() {
        for (i, (value, object, seq)) in list.iter().enumerate() {
            at.entry(*value).or_default().push((target.clone(), object.clone(), *seq, i));
        }
    }
    Seen { at }
}

/// Every promise, after the world settled.
pub(crate) fn promises(run: &Run<'_>) -> Result<(), String> {
    run.sim.audit().map_err(|e| format!("the audit: {e}"))?;
    single_holder(run)?;
    drained(run)?;
    let seen = seen(run);
    if let Some((v, times)) = seen.at.iter().find(|(_, t)| t.len() > 1) {
        return Err(format!("once: value {v} applied {} times: {times:?}", times.len()));
    }
    for i in 0..run.scenario.requests.len() {
        answered_once(run, &seen, i)?;
        retries_answer(run, i)?;
        refusal_wrote_nothing(run, &seen, i)?;
    }
    order_by_answer(run)?;
    one_content_per_key(run, &seen)?;
    retries_end(run, &seen)
}

fn drained(run: &Run<'_>) -> Result<(), String> {
    for (name, src) in run.sim.world.sources.borrow().iter() {
        let st = src.relay.outbox().state().map_err(|e| e.to_string())?;
        if st.queued_rows + st.parked_rows > 0 {
            return Err(format!(
                "everything drains: {name} still holds {} rows",
                st.queued_rows + st.parked_rows
            ));
        }
    }
    Ok(())
}

fn successes<'r>(run: &'r Run<'_>, i: usize) -> Vec<(&'r Attempt, u32, &'r RoutedEnqueue)> {
    run.attempts
        .iter()
        .filter(|a| a.request == i)
        .filter_map(|a| match &a.ended {
            Some((at, Ok(done))) => Some((a, *at, done)),
            _ => None,
        })
        .collect()
}

/// The object a position names.
fn object(run: &Run<'_>, part: Part) -> String {
    part.object(&crate::sim::name(run.scenario.logical)).to_string()
}

/// **Once**, for request `i`'s answer.
fn answered_once(run: &Run<'_>, seen: &Seen, i: usize) -> Result<(), String> {
    let Some((_, _, done)) = successes(run, i).into_iter().next() else { return Ok(()) };
    for (k, position) in done.positions.iter().enumerate() {
        let value = super::scenario::value_of(i, k);
        let Some(times) = seen.at.get(&value) else {
            return Err(format!(
                "once: request {i} was answered but its row {k} (value {value}) never applied"
            ));
        };
        let (_, obj, seq, _) = &times[0];
        let want = (object(run, position.partition), position.seq);
        if (obj.clone(), *seq) != want {
            return Err(format!(
                "once: request {i} row {k} was answered at {want:?} but applied from ({obj}, {seq})"
            ));
        }
    }
    Ok(())
}

/// **A retry answers what was committed.**
fn retries_answer(run: &Run<'_>, i: usize) -> Result<(), String> {
    let all = successes(run, i);
    let Some(&(_, first_at, first)) = all.first() else { return Ok(()) };
    for (a, _, done) in all.iter().skip(1) {
        if a.started > first_at && (!done.duplicate || done.positions != first.positions) {
            return Err(format!(
                "a retry answers what was committed: request {i} answered {:?} first, then (duplicate: {}) {:?}",
                first.positions, done.duplicate, done.positions
            ));
        }
    }
    Ok(())
}

/// **A refusal writes nothing.**
fn refusal_wrote_nothing(run: &Run<'_>, seen: &Seen, i: usize) -> Result<(), String> {
    let attempts: Vec<&Attempt> = run.attempts.iter().filter(|a| a.request == i).collect();
    let all_refused = !attempts.is_empty()
        && attempts
            .iter()
            .all(|a| !a.crashed && matches!(&a.ended, Some((_, Err(f))) if f.committed.is_empty()));
    if !all_refused {
        return Ok(());
    }
    let applied: Vec<u64> = seen.at.keys().copied().filter(|v| row_of(*v).0 == i).collect();
    if applied.is_empty() {
        Ok(())
    } else {
        Err(format!("a refusal writes nothing: request {i} was only refused, yet {applied:?} applied"))
    }
}

/// **Order by answer.**
fn order_by_answer(run: &Run<'_>) -> Result<(), String> {
    let answered: BTreeMap<usize, u32> = (0..run.scenario.requests.len())
        .filter_map(|i| successes(run, i).iter().map(|(_, at, _)| *at).min().map(|at| (i, at)))
        .collect();
    let first_sent: BTreeMap<usize, u32> = run.attempts.iter().fold(BTreeMap::new(), |mut m, a| {
        let e = m.entry(a.request).or_insert(a.started);
        *e = (*e).min(a.started);
        m
    });
    for (target, list) in run.applied.borrow().iter() {
        let index: Vec<(usize, usize)> = list.iter().map(|(v, _, _)| row_of(*v)).collect();
        for (x, (ra, ka)) in index.iter().enumerate() {
            for (rb, kb) in index.iter().skip(x + 1) {
                let same_request_out_of_order = ra == rb && kb < ka;
                let b_before_a =
                    answered.get(rb).zip(first_sent.get(ra)).is_some_and(|(ans, sent)| ans < sent);
                if same_request_out_of_order || b_before_a {
                    return Err(format!(
                        "order by answer: {target} applied request {ra} row {ka} before request {rb} row {kb}"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// **One content per key.**
fn one_content_per_key(run: &Run<'_>, seen: &Seen) -> Result<(), String> {
    let mut by_key: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
    for v in seen.at.keys() {
        let (i, _) = row_of(*v);
        if let Some(key) = run.scenario.requests.get(i).and_then(|r| r.key.as_deref()) {
            by_key.entry(key).or_default().insert(i);
        }
    }
    match by_key.iter().find(|(_, requests)| requests.len() > 1) {
        Some((key, requests)) => {
            Err(format!("one content per key: {key} applied rows of requests {requests:?}"))
        }
        None => Ok(()),
    }
}

/// **Retries end.**
fn retries_end(run: &Run<'_>, seen: &Seen) -> Result<(), String> {
    for a in run.attempts.iter().filter(|a| a.settling) {
        let i = a.request;
        match &a.ended {
            Some((_, Ok(_))) => {}
            Some((_, Err(f))) if matches!(f.error, EnqueueRefusal::Conflict { .. }) => {
                let key = run.scenario.requests[i].key.as_deref();
                let owner =
                    seen.at.keys().map(|v| row_of(*v).0).any(|j| {
                        j != i && run.scenario.requests.get(j).and_then(|r| r.key.as_deref()) == key
                    });
                if !owner {
                    return Err(format!("retries end: request {i} was refused as a conflict, but no other content under its key applied"));
                }
            }
            other => return Err(format!("retries end: request {i}'s last retry ended {other:?}")),
        }
    }
    Ok(())
}
