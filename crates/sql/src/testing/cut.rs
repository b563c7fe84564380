//! [`CutOff`]: the platform ending an invocation between two of its
//! effects (a CPU limit, an eviction, an isolate restart), injected at a
//! chosen boundary. Shared by a [`FaultySql`](super::FaultySql) and the
//! [`MemoryAlarm`](super::MemoryAlarm) of the same object, so every
//! statement and every alarm operation counts as one boundary, and from
//! the one it falls at on, each fails: nothing an invocation does after
//! the platform ended it takes effect (an open transaction rolls back).

use std::cell::Cell;
use std::rc::Rc;

use crate::store::StoreError;

/// The error every effect after a cut-off fails with.
pub const INJECTED_CUT: &str = "injected cut-off: the platform ended the invocation";

/// Where a cut-off falls, and how many effects ran before it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct CutState {
    /// Effects still to run before the cut falls; `None`: none armed.
    left: Option<u64>,
    /// Whether the cut fell: every later effect fails.
    fallen: bool,
    /// Effects run so far (counting none past the cut).
    effects: u64,
}

/// A cut-off to inject into one object's store and alarm (shared by its
/// clones). Unarmed, it changes nothing.
#[derive(Clone, Debug, Default)]
pub struct CutOff(Rc<Cell<CutState>>);

impl CutOff {
    /// Arms the cut to fall at the effect after the next `n` (0: the next).
    pub fn after(&self, n: u64) {
        let state = self.0.get();
        self.0.set(CutState { left: Some(n), fallen: false, ..state });
    }

    /// Cuts now, between two effects (the invocation awaits something).
    pub fn now(&self) {
        let state = self.0.get();
        self.0.set(CutState { left: None, fallen: true, ..state });
    }

    /// Disarms a cut that has not fallen, so what runs next (a test's own
    /// reads) runs whole.
    pub fn disarm(&self) {
        let state = self.0.get();
        self.0.set(CutState { left: None, ..state });
    }

    /// Whether the cut fell.
    pub fn fallen(&self) -> bool {
        self.0.get().fallen
    }

    /// Effects run so far.
    pub fn effects(&self) -> u64 {
        self.0.get().effects
    }

    /// One effect: refused once the cut fell, or if it falls here.
    pub fn effect(&self) -> Result<(), StoreError> {
        let mut state = self.0.get();
        match state.left {
            _ if state.fallen => {}
            Some(0) => (state.left, state.fallen) = (None, true),
            left => (state.left, state.effects) = (left.map(|n| n - 1), state.effects + 1),
        }
        self.0.set(state);
        match state.fallen {
            true => Err(StoreError::Sql(INJECTED_CUT.into())),
            false => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_falls_at_its_effect_and_refuses_every_later_one() {
        let cut = CutOff::default();
        assert!(cut.effect().is_ok(), "unarmed, nothing fails");
        cut.after(2);
        assert!(cut.effect().is_ok() && cut.effect().is_ok(), "two effects run");
        assert!(cut.effect().is_err() && cut.fallen(), "the third is cut");
        assert!(cut.effect().is_err(), "and so is every later one");
        assert_eq!(cut.effects(), 3, "the effects that ran");
        let disarmed = CutOff::default();
        disarmed.after(0);
        disarmed.disarm();
        assert!(disarmed.effect().is_ok(), "disarmed before it fell, nothing fails");
        let now = CutOff::default();
        now.now();
        assert!(now.effect().is_err(), "cut between two effects: the next fails");
    }
}
