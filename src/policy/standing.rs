//! Standing violations (docs/design/cli.md, "The daily loop"): which failing verdicts of a plan
//! fail on the fleet as it stands too, before the plan. A plan without changes is the
//! fleet as it stands, so all its failures are; a plan with changes is judged again with
//! its changes undone ([`crate::plan::standing`]), and only when something failed, so a
//! plan that passes costs nothing more.

use crate::cost::{self, CostError, PriceBook};
use crate::policy::{Facts, Policy, PolicyResult, evaluate};

/// Set `standing` on each failing verdict of `results` (judged on `facts`) that fails on
/// the fleet as it stands as well (same policy, same `for_each` key).
pub fn mark(
    results: &mut [PolicyResult],
    policies: &[Policy],
    facts: &Facts<'_>,
    overrides: &[String],
    prices: &PriceBook,
) -> Result<(), CostError> {
    if results.iter().all(|r| r.passed) {
        return Ok(());
    }
    if !facts.plan.has_changes() {
        results.iter_mut().filter(|r| !r.passed).for_each(|r| r.standing = true);
        return Ok(());
    }
    let stands = crate::plan::standing::as_it_stands(facts.plan);
    let mut report = cost::cost(&stands, facts.spec, prices)?;
    // A quota covers only the pools that exist (quota checks read its pools from the spec).
    let existing: std::collections::BTreeSet<&crate::addr::Address> =
        stands.changes.iter().map(|c| &c.address).collect();
    for q in &mut report.quotas {
        q.pools.retain(|p| existing.contains(p));
    }
    let before = evaluate(policies, &Facts { plan: &stands, cost: &report, ..*facts }, overrides);
    for r in results.iter_mut().filter(|r| !r.passed) {
        r.standing = before.iter().any(|b| !b.passed && b.name == r.name && b.key == r.key);
    }
    Ok(())
}
