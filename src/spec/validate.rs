//! Cross-resource validation against the catalog and provider blocks.

use crate::diag::Diagnostics;
use crate::spec::Spec;

pub fn validate(spec: &Spec, diags: &mut Diagnostics) {
    let _ = (spec, diags);
}
