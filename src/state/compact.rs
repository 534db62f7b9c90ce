//! What keeps a state small over a year of applies (docs/design/state-and-locks.md,
//! "State that stays small"): the history's newest [`HISTORY_LIMIT`] entries with the
//! older ones counted, and the spend ledger's lines of closed months folded into
//! monthly totals. Both are deterministic functions of the state, so a journal replayed
//! onto the previous state gives the same file as the write it was folded into.

use std::collections::{BTreeMap, BTreeSet};

use super::model::{HISTORY_LIMIT, HistoryEntry, HistorySummary, MonthSpend, SpendEntry, State};
use super::spend::month_of;

const HOUR_MS: f64 = 3_600_000.0;

/// Both foldings, as every write does them.
pub fn tidy(state: &mut State) {
    cap_history(&mut state.history, &mut state.history_summary);
    fold_spend(state);
}

/// Keep the newest [`HISTORY_LIMIT`] entries; count the older ones into `summary`.
pub fn cap_history(history: &mut Vec<HistoryEntry>, summary: &mut Option<HistorySummary>) {
    if history.len() <= HISTORY_LIMIT {
        return;
    }
    let dropped: Vec<HistoryEntry> = history.drain(..history.len() - HISTORY_LIMIT).collect();
    let s = summary.get_or_insert_with(|| HistorySummary {
        from: dropped[0].at.clone(),
        to: dropped[0].at.clone(),
        events: BTreeMap::new(),
    });
    for e in &dropped {
        *s.events.entry(e.event.clone()).or_default() += 1;
    }
    if let Some(last) = dropped.last() {
        s.to = last.at.clone();
    }
}

/// Fold every ledger line that closed before the month of the ledger's newest time into
/// [`State::spend_months`], except lines a job run recorded in the state points at (a
/// job's cost so far reads them) and each provider's newest line (the month-to-date
/// report takes its clock from the providers named in the ledger). Month-to-date figures
/// never read a folded line: the report's month is at least the ledger's newest month
/// (its clock is the providers', which gave every time in the ledger), and the line
/// ended before that month began.
pub fn fold_spend(state: &mut State) {
    let time = |l: &SpendEntry| l.end_ms.unwrap_or(l.start_ms).max(l.start_ms);
    let Some(newest) = state.spend.values().map(time).max() else {
        return;
    };
    let (_, month_start) = month_of(newest);
    let closed = |l: &SpendEntry| l.end_ms.is_some_and(|e| e < month_start);
    if !state.spend.values().any(closed) {
        return;
    }
    let mut keep: BTreeSet<&str> = state
        .resources
        .values()
        .filter_map(|r| r.job.as_deref())
        .flat_map(|j| j.runs.iter().map(|run| run.node_id.as_str()))
        .collect();
    let mut newest_of: BTreeMap<&str, (u64, &str)> = BTreeMap::new();
    for (id, l) in &state.spend {
        let seen = newest_of.entry(l.provider.as_str()).or_insert((time(l), id.as_str()));
        if time(l) > seen.0 {
            *seen = (time(l), id.as_str());
        }
    }
    keep.extend(newest_of.values().map(|(_, id)| *id));
    let folding: Vec<String> = state
        .spend
        .iter()
        .filter(|(id, l)| closed(l) && !keep.contains(id.as_str()))
        .map(|(id, _)| id.clone())
        .collect();
    for id in folding {
        if let Some(line) = state.spend.remove(&id) {
            fold_line(&mut state.spend_months, &line);
        }
    }
}

/// Add a closed line's hours to each calendar month (UTC) they fall in.
fn fold_line(months: &mut BTreeMap<String, MonthSpend>, line: &SpendEntry) {
    let end = line.end_ms.unwrap_or(line.start_ms);
    let mut from = line.start_ms;
    loop {
        let (month, start) = month_of(from);
        let next = next_month_start(start);
        let until = end.min(next);
        let m = months.entry(month).or_default();
        if from == line.start_ms {
            m.lines += 1;
        }
        if until > from {
            let usd = (until - from) as f64 / HOUR_MS * line.usd_per_hour;
            m.usd += usd;
            *m.by_pool.entry(line.pool.clone()).or_default() += usd;
            if let Some(job) = &line.job {
                *m.by_job.entry(job.clone()).or_default() += usd;
            }
        }
        if end <= next {
            return;
        }
        from = next;
    }
}

/// The first millisecond of the month after the one starting at `start`.
fn next_month_start(start: u64) -> u64 {
    // 32 days after any month's start is in the next month.
    month_of(start + 32 * 24 * 3_600_000).1
}
