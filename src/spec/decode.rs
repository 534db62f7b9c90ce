//! Schema-driven decoding of raw blocks into the typed model.

use crate::diag::{Diagnostics, Sources};
use crate::spec::{LoadOptions, Spec, raw};

pub fn decode(sources: &Sources, files: &[raw::File], opts: &LoadOptions, diags: &mut Diagnostics) -> Spec {
    let _ = (sources, files, opts, diags);
    Spec::default()
}
