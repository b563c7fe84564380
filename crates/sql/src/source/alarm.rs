//! The source's alarm: running one (the driver, then the next wake-up, the
//! back-off, the daily write limit's sleep), keeping the one stored alarm
//! right (load, arm, re-check, re-arm, drop) and sharing it with the host.

use super::*;
use crate::core::{IN_TURN_ALARM_GRACE_MS, IN_TURN_DEFER_MAX_MS, IN_TURN_KEPT_ALARMS_MAX};

impl<S: Sql, A: AlarmStore> Relay<S, A> {
    /// Runs one alarm: the driver's fires against `targets`, then arms the
    /// next wake-up. On a storage error it arms a back-off first and then
    /// fails, so the caller may throw; but when the platform refused a write
    /// for the account's daily allowance it arms the alarm at 00:00 UTC and
    /// answers a summary with `write_limited` set (and no figures of the
    /// fires it lost), since the platform's own retries, seconds apart, would
    /// only meet the same refusal and then drop the alarm.
    pub async fn alarm(
        &self,
        targets: &impl Targets,
        now: &dyn Fn() -> u64,
        observer: &impl FireObserver,
    ) -> Result<AlarmSummary, AlarmFailure> {
        // The platform consumed the alarm that woke us.
        self.known.set(AlarmKnown::None);
        let retry_count = self.retried.replace(0);
        if self.delivering.get() && now().saturating_sub(self.run_started_ms.get()) < IN_TURN_DEFER_MAX_MS {
            return self.defer_to_delivery(now).await;
        }
        if retry_count == 0 {
            if let Some(summary) = self.keep_for_stream(now).await? {
                return Ok(summary);
            }
        }
        self.kept_alarms.set(0);
        self.run(Run::Alarm { retry_count }, targets, now, observer).await
    }

    /// The safety-net alarm of a live stream: when every row is delivered
    /// but the one kept for the next enqueue to write over (see the
    /// outbox's `handover.rs`), and an enqueue asked for an in-turn
    /// delivery within the last [`IN_TURN_ALARM_GRACE_MS`], the alarm only
    /// arms itself that far ahead again, the one write a stream needs that
    /// often anyway, and leaves the row for the next enqueue: removing it
    /// now would cost a second. Not past [`IN_TURN_KEPT_ALARMS_MAX`] in a
    /// row, nor when the host's own time has come: then the alarm runs in
    /// full.
    async fn keep_for_stream(&self, now: &dyn Fn() -> u64) -> Result<Option<AlarmSummary>, AlarmFailure> {
        let started = now();
        let live = started.saturating_sub(self.asked_ms.get()) < IN_TURN_ALARM_GRACE_MS;
        let kept = self.kept_alarms.get();
        if !live || kept >= IN_TURN_KEPT_ALARMS_MAX || !self.outbox.keeps_delivered_row() {
            return Ok(None);
        }
        let store = |e| AlarmFailure { error: AlarmError::Store(e), retry_at_ms: None };
        let host_due = self.host_alarm().map_err(store)?.is_some_and(|at| at <= started);
        if host_due || self.outbox.state().map_err(store)?.queued_rows > 0 {
            return Ok(None);
        }
        self.kept_alarms.set(kept + 1);
        self.outbox.note_alarm();
        let at = started.saturating_add(IN_TURN_ALARM_GRACE_MS);
        self.arm_at(at).await.map_err(store)?;
        Ok(Some(self.idle(started, at, now())))
    }

    /// An alarm that comes while an in-turn delivery of this instance runs
    /// delivers nothing, so that a target never has two of the source's
    /// requests in flight at once (an endpoint has no watermark to make the
    /// second harmless, and would see it). It makes that delivery run once
    /// more for whatever waits, and arms the safety net again: as far
    /// ahead as that delivery has awaited since it last heard anything
    /// ([`IN_TURN_ALARM_GRACE_MS`] at least, 10 s at most, see
    /// `lease_at`), so if the platform cuts the delivery off its rows come
    /// back within that, and a slow call is checked on at 5 s, then every
    /// 10 s. The delivery arms sooner if it leaves rows. A delivery whose
    /// latest run started [`IN_TURN_DEFER_MAX_MS`] ago or more is taken
    /// for stuck, and the alarm delivers.
    async fn defer_to_delivery(&self, now: &dyn Fn() -> u64) -> Result<AlarmSummary, AlarmFailure> {
        let started = now();
        self.asked.set(true);
        let host_alarm = self.take_host_alarm(started);
        let at = self.lease_at(started);
        let armed = self.arm_at(at).await;
        armed.map_err(|e| AlarmFailure { error: AlarmError::Store(e), retry_at_ms: None })?;
        Ok(AlarmSummary { host_alarm, ..self.idle(started, at, now()) })
    }

    /// The summary of an alarm that started at `started` and that the daily
    /// write refusal stopped at `ended`; it sleeps until `next_at_ms`. Its
    /// queue as it stands (reads still work).
    pub(super) fn write_limited(&self, started: u64, next_at_ms: u64, ended: u64) -> AlarmSummary {
        AlarmSummary { write_limited: true, ..self.idle(started, next_at_ms, ended) }
    }

    /// The summary of an alarm that started at `started`, ran no fire and
    /// ended at `ended`, the next armed for `next_at_ms`: its queue as it
    /// stands (reads still work).
    fn idle(&self, started: u64, next_at_ms: u64, ended: u64) -> AlarmSummary {
        let state = self.outbox.state().unwrap_or_default();
        AlarmSummary {
            source: self.name.to_string(),
            next_in_ms: Some(next_at_ms.saturating_sub(ended)),
            subrequest_cap: self.config.get().alarm.budget.calls_per_alarm(),
            started_at_ms: started,
            duration_ms: ended.saturating_sub(started),
            queued_rows: state.queued_rows,
            queued_bytes: state.queued_bytes,
            parked_rows: state.parked_rows,
            ..AlarmSummary::default()
        }
    }

    /// Reads the stored alarm afresh and re-arms one the outbox needs but
    /// does not have (the platform dropped it, or a caller's transaction
    /// rolled back an alarm noted by [`enqueue_now`](Relay::enqueue_now)).
    /// Answers the stored alarm as read, and whether it re-armed.
    pub async fn recheck_alarm(&self, now_ms: u64) -> Result<(Option<u64>, bool), StoreError> {
        let (stored, rearmed, _) = self.recheck(now_ms).await?;
        Ok((stored, rearmed.is_some()))
    }

    /// [`recheck_alarm`](Relay::recheck_alarm), also answering the rows
    /// queued (one read of the state); the time it re-armed at, if it did.
    ///
    /// Beside a dropped alarm it puts right one the host moved: the stored
    /// alarm is missing or later than the time this instance last armed
    /// (still ahead), or than the host's own time. It re-arms at the
    /// earlier of what the relay and the host need and logs a
    /// `relay_alarm_moved` warning naming the fix.
    pub(super) async fn recheck(&self, now_ms: u64) -> Result<(Option<u64>, Option<u64>, u64), StoreError> {
        let armed_before = self.known.get();
        let stored = self.alarm.get().await?;
        self.known.set(stored.map_or(AlarmKnown::None, AlarmKnown::At));
        let queued_rows = self.outbox.state()?.queued_rows;
        // A running fire arms its own next wake-up.
        if self.firing.get() {
            return Ok((stored, None, queued_rows));
        }
        // What the relay needs: now, for rows with no alarm or whose alarm
        // this instance armed in the past (it is due, not later); else the
        // time it armed, while still ahead.
        let relay_due = match armed_before {
            _ if needs_rearm(queued_rows, stored) => Some(now_ms),
            AlarmKnown::At(at) if at >= now_ms => Some(at),
            AlarmKnown::At(_) if queued_rows > 0 => Some(now_ms),
            _ => None,
        };
        let needed = shared_alarm(relay_due, self.host_alarm()?);
        if !alarm_moved(needed, stored, now_ms) {
            return Ok((stored, None, queued_rows));
        }
        self.arm(relay_due, 0).await?;
        let rearmed_at = needed.map(|at| at.max(now_ms));
        self.alarm.moved(&serde_json::json!({"event": "relay_alarm_moved", "source": self.name.as_str(),
                "stored_ms": stored, "rearmed_ms": rearmed_at, "queued_rows": queued_rows,
                "fix": "the object's alarm was missing or later than the relay or its host needs, so it was \
                        re-armed: if your code calls setAlarm or deleteAlarm on the object's storage, arm \
                        your own time through the relay instead (setAlarm / set_alarm), which keeps both"}));
        Ok((stored, rearmed_at, queued_rows))
    }

    /// Sets the alarm if rows are queued and none is set: the platform
    /// drops an alarm whose retries all failed, and a source that then gets
    /// no traffic would keep its rows. Puts right an alarm moved later
    /// than the relay and its host need, too (see `recheck`). Reads the state row and the alarm;
    /// call it from a scheduled sweep over your sources.
    pub async fn rearm(&self, now_ms: u64) -> Result<Rearmed, StoreError> {
        let (stored, rearmed_at, queued_rows) = self.recheck(now_ms).await?;
        Ok(Rearmed { rearmed: rearmed_at.is_some(), alarm_at_ms: rearmed_at.or(stored), queued_rows })
    }

    /// Deletes the stored alarm, as the platform does after too many failed
    /// retries: without telling this instance, whose memory of the alarm
    /// is left as it was (a test fault: the next status read, enqueue or
    /// re-arm must set it again).
    pub async fn drop_alarm(&self) -> Result<(), StoreError> {
        self.alarm.delete().await
    }

    /// Forgets a remembered alarm whose time has passed. An alarm that came
    /// due runs `alarm()`, which forgets it first; still remembering one
    /// means the platform dropped it unseen (its retries failed), and
    /// trusting the memory would leave new rows with no alarm. The next
    /// use reads the stored alarm again (one read).
    pub(super) fn forget_past_alarm(&self, now_ms: u64) {
        if matches!(self.known.get(), AlarmKnown::At(at) if at < now_ms) {
            self.known.set(AlarmKnown::Unknown);
        }
    }

    /// Loads what this instance knows of its alarm, if it does not know.
    pub(super) async fn load_alarm(&self) -> Result<(), StoreError> {
        if self.known.get() != AlarmKnown::Unknown {
            return Ok(());
        }
        let stored = self.alarm.get().await?;
        // An alarm handler may have started meanwhile and knows better.
        if self.known.get() == AlarmKnown::Unknown {
            self.known.set(stored.map_or(AlarmKnown::None, AlarmKnown::At));
        }
        Ok(())
    }

    /// Ensures an alarm is due no later than `due_ms` (and the host's
    /// time); writes nothing when the known alarm already is.
    pub(super) async fn arm_at(&self, due_ms: u64) -> Result<(), StoreError> {
        self.arm(Some(due_ms), 0).await
    }

    /// Ensures the alarm is due no later than the relay's `relay_due` and
    /// the host's own time (counted no earlier than `host_floor`); writes
    /// nothing when the known alarm already is early enough.
    pub(super) async fn arm(&self, relay_due: Option<u64>, host_floor: u64) -> Result<(), StoreError> {
        let Some(at) = self.note_armed(relay_due, host_floor)? else { return Ok(()) };
        self.alarm.set(at).await.inspect_err(|_| {
            // We no longer know what is stored; the next use reloads it.
            self.known.set(AlarmKnown::Unknown);
        })
    }

    /// Notes the alarm as armed at the earlier of the relay's `relay_due`
    /// and the host's own time (counted no earlier than `host_floor`), and
    /// answers the time to set it to, or `None` when the known alarm
    /// already is early enough (nothing to write). Every arming comes
    /// here, so no path arms the relay's time alone.
    pub(super) fn note_armed(
        &self,
        relay_due: Option<u64>,
        host_floor: u64,
    ) -> Result<Option<u64>, StoreError> {
        // A host time counted no earlier than the relay's cannot be the
        // earlier one: not read (a back-off arms even when reads fail).
        let host = match relay_due {
            Some(due) if due <= host_floor => None,
            _ => self.host_alarm()?.map(|at| at.max(host_floor)),
        };
        let Some(due_ms) = shared_alarm(relay_due, host) else { return Ok(None) };
        let Some(at) = arm(self.known.get(), due_ms) else { return Ok(None) };
        self.known.set(AlarmKnown::At(at));
        self.outbox.note_write();
        Ok(Some(at))
    }

    /// The host's own alarm time: what it set with
    /// [`set_host_alarm`](Relay::set_host_alarm) and no alarm has reported
    /// yet. Never the relay's own time (the object's alarm may be earlier).
    pub fn host_alarm(&self) -> Result<Option<u64>, StoreError> {
        if let Some(at) = self.host.get() {
            return Ok(at);
        }
        let row = self.outbox.sql().first("SELECT at_ms FROM relay_host_alarm WHERE id = 1", vec![])?;
        let at = row.map(|r| r.u64(0)).transpose()?;
        self.host.set(Some(at));
        Ok(at)
    }

    /// Sets the host's own alarm time (ms since the epoch; replacing any
    /// other), kept in the relay's tables so a restart does not lose it:
    /// the object's alarm is armed at the earlier of it and the relay's
    /// own, and the alarm that finds it come reports it
    /// ([`AlarmSummary::host_alarm`]). The host's way to use the object's
    /// one alarm beside the relay: setting the object's alarm directly
    /// would move the relay's. A time later than the one set before leaves
    /// the object's alarm where it is; it may then wake once early, which
    /// reports nothing to the host. Refuses a time past [`SEQ_MAX`].
    pub async fn set_host_alarm(&self, at_ms: u64, now_ms: u64) -> Result<(), StoreError> {
        if at_ms > SEQ_MAX {
            return Err(StoreError::Guard("an alarm time past SEQ_MAX"));
        }
        self.forget_past_alarm(now_ms);
        self.load_alarm().await?;
        self.outbox.sql().run(
            "INSERT INTO relay_host_alarm (id, at_ms) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET at_ms = excluded.at_ms",
            vec![int(at_ms)],
        )?;
        self.outbox.note_write();
        self.host.set(Some(Some(at_ms)));
        self.arm(Some(at_ms), 0).await
    }

    /// Clears the host's own alarm time. The object's alarm stays where it
    /// is (it may be the relay's too); if it was armed for the host alone
    /// it wakes once and reports nothing to the host.
    pub fn delete_host_alarm(&self) -> Result<(), StoreError> {
        self.outbox.sql().run("DELETE FROM relay_host_alarm", vec![])?;
        self.outbox.note_write();
        self.host.set(Some(None));
        Ok(())
    }

    /// Whether the host's own time has come at `now_ms`; if so clears it,
    /// as the platform clears an alarm that fired. Should clearing the
    /// stored time fail it is forgotten here all the same, and an instance
    /// that starts later reports it again: like the platform's alarms, the
    /// host's is delivered at least once.
    pub(super) fn take_host_alarm(&self, now_ms: u64) -> bool {
        match self.host_alarm() {
            Ok(Some(at)) if at <= now_ms => {
                self.host.set(Some(None));
                if self.outbox.sql().run("DELETE FROM relay_host_alarm", vec![]).is_ok() {
                    self.outbox.note_write();
                }
                true
            }
            _ => false,
        }
    }
}
