//! Value parsers shared by the argument structs: durations, intervals, provider kinds.

use std::time::Duration;

use crate::spec::model::ProviderKind;

pub(super) fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::model::time::duration(s).map_err(|e| format!("{e}; try e.g. `30s`, `5m`, `1h`"))
}

pub(super) fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_secs(1) {
        return Err("the interval must be at least 1s".into());
    }
    Ok(d)
}

pub(super) fn parse_provider(s: &str) -> Result<ProviderKind, String> {
    ProviderKind::ALL.into_iter().find(|p| p.as_str() == s).ok_or_else(|| {
        let names: Vec<&str> = ProviderKind::ALL.iter().map(|p| p.as_str()).collect();
        format!("expected one of {}", names.join(", "))
    })
}
