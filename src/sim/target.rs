//! A simulated target partition: a key-value map, one watermark per source,
//! a log of what it applied, and its injectable faults. It applies batches
//! with the same core rules the target Durable Object uses.

use std::collections::BTreeMap;

use crate::core::{
    decode_request, plan_apply, ApplyError, ApplyReply, ApplyRequest, Failure, Name, RelayHook,
};

/// How a simulated target behaves when called.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TargetFault {
    /// Applies batches and answers.
    #[default]
    Healthy,
    /// Refuses every call with a transient error until healed.
    Reject,
    /// Refuses every call as a permanent error until healed.
    RejectPermanently,
}

/// One simulated target.
pub struct SimTarget {
    /// Current keys and their JSON values.
    pub(super) kv: BTreeMap<String, String>,
    /// Highest applied sequence per source.
    pub(super) watermarks: BTreeMap<Name, u64>,
    /// Sequences applied per source, in application order.
    pub(super) applied: BTreeMap<Name, Vec<u64>>,
    /// Calls received, including failed ones.
    pub(super) calls: u64,
    /// Current fault.
    pub(super) fault: TargetFault,
    /// Replies to drop after applying (the apply stands).
    pub(super) lose_replies: u32,
    /// Optional hook adding effects to each apply.
    pub(super) hook: Option<Box<dyn RelayHook>>,
}

impl std::fmt::Debug for SimTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimTarget")
            .field("keys", &self.kv.len())
            .field("watermarks", &self.watermarks)
            .field("calls", &self.calls)
            .field("fault", &self.fault)
            .finish()
    }
}

impl SimTarget {
    pub(super) fn new() -> SimTarget {
        SimTarget {
            kv: BTreeMap::new(),
            watermarks: BTreeMap::new(),
            applied: BTreeMap::new(),
            calls: 0,
            fault: TargetFault::Healthy,
            lose_replies: 0,
            hook: None,
        }
    }

    /// Handles one apply call with the wire body the source sent.
    pub(super) fn call(&mut self, body: &str) -> Result<ApplyReply, Failure> {
        self.calls += 1;
        match self.fault {
            TargetFault::Healthy => {}
            TargetFault::Reject => return Err(Failure::Transient("injected rejection".into())),
            TargetFault::RejectPermanently => {
                return Err(Failure::Permanent("injected permanent rejection".into()))
            }
        }
        let request = decode_request(body).map_err(|e| Failure::Permanent(e.to_string()))?;
        // A hook refusal may pass (it is the embedder's policy); anything
        // else about a batch that decoded is permanent.
        let reply = self.apply(&request).map_err(|e| match e {
            ApplyError::Hook(_) => Failure::Transient(e.to_string()),
            _ => Failure::Permanent(e.to_string()),
        })?;
        if self.lose_replies > 0 {
            self.lose_replies -= 1;
            return Err(Failure::Transient("injected lost reply".into()));
        }
        Ok(reply)
    }

    /// Applies a validated batch atomically: all of it or none.
    fn apply(&mut self, request: &ApplyRequest) -> Result<ApplyReply, ApplyError> {
        let watermark = self.watermarks.get(&request.source).copied().unwrap_or(0);
        let plan = plan_apply(watermark, request);
        let rows = plan.to_apply(request);
        if rows.is_empty() {
            return Ok(plan.reply(request));
        }
        let extra = match &self.hook {
            Some(hook) => hook.extra_effects(&request.source, rows).map_err(ApplyError::Hook)?,
            None => Default::default(),
        };
        let log = self.applied.entry(request.source.clone()).or_default();
        for row in rows {
            for (k, v) in &row.effects.puts {
                self.kv.insert(k.clone(), v.as_str().to_owned());
            }
            for k in &row.effects.deletes {
                self.kv.remove(k);
            }
            log.push(row.seq);
        }
        for (k, v) in &extra.puts {
            self.kv.insert(k.clone(), v.as_str().to_owned());
        }
        for k in &extra.deletes {
            self.kv.remove(k);
        }
        self.watermarks.insert(request.source.clone(), plan.watermark);
        Ok(plan.reply(request))
    }
}
