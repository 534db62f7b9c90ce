//! The decoder of a pool's `health {}` block (docs/design/gpu-health.md): readiness,
//! signals, action, max_repairs and grace, each checked where it is written. Beside the
//! other pool blocks' decoders (`pool_blocks.rs`), in a file of its own so the pool's
//! decoder stays short.

use crate::diag::Diagnostic;
use crate::model::health::Signal;
use crate::spec::fields::{Cx, Fields, Reported, enum_error};
use crate::spec::model::{Health, HealthAction, Readiness, Spanned};

/// The attributes a `health {}` block takes.
pub const HEALTH_ATTRS: &[&str] = &["readiness", "signals", "action", "max_repairs", "grace"];

const READINESS: &[(&str, Readiness)] =
    &[("dcgm", Readiness::Dcgm), ("nvidia-smi", Readiness::NvidiaSmi), ("none", Readiness::None)];

const ACTIONS: &[(&str, HealthAction)] =
    &[("replace", HealthAction::Replace), ("quarantine", HealthAction::Quarantine)];

/// The most repairs an hour a pool may ask for: a bound, not a fleet size.
const MAX_REPAIRS: u32 = 1_000;

/// Decode `health {}`; every problem is reported with its location.
pub fn health(mut f: Fields<'_>, cx: &mut Cx<'_, '_>) -> Result<Health, Reported> {
    let defaults = Health::default();
    let readiness = f.enumeration(cx, "readiness", READINESS);
    let readiness = f.or(readiness, defaults.readiness.value);
    let signals = f.string_list(cx, "signals");
    let signals = match signals {
        Some(list) => signals_of(&mut f, cx, list),
        None => defaults.signals,
    };
    let action = f.enumeration(cx, "action", ACTIONS);
    let action = f.or(action, HealthAction::Replace);
    let max_repairs = f.u32(cx, "max_repairs", 0, MAX_REPAIRS);
    let max_repairs = f.or(max_repairs, defaults.max_repairs.value);
    let grace = f.duration(cx, "grace");
    let failed = f.failed;
    f.finish(cx, HEALTH_ATTRS);
    if failed {
        return Err(Reported);
    }
    Ok(Health { readiness, signals, action, max_repairs, grace })
}

/// Each name in `signals` as a [`Signal`]; an unknown one is reported at its element, an
/// empty list at the attribute (a pool that counts no fault says so with `action`, not
/// with an empty list that reads like the default).
fn signals_of(f: &mut Fields<'_>, cx: &mut Cx<'_, '_>, list: Spanned<Vec<Spanned<String>>>) -> Vec<Spanned<Signal>> {
    if list.value.is_empty() {
        cx.error(
            Diagnostic::error("gpuplan::spec::health_signals", "`signals` is empty: no fault would mark a node")
                .at(list.span, "no signals")
                .help("leave `signals` out for the default set, or name some, e.g. `[\"xid_fatal\"]`"),
        );
        f.failed = true;
        return Vec::new();
    }
    let mut out = Vec::new();
    for s in list.value {
        match Signal::parse(&s.value) {
            Some(sig) => out.push(Spanned::new(sig, s.span)),
            None => {
                cx.error(enum_error("signals", &s.value, Signal::ALL.iter().map(|x| x.as_str()), s.span));
                f.failed = true;
            }
        }
    }
    out
}
