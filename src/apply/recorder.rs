//! Group commit of finished operations into the state journal.
//!
//! Apply tasks send journal entries to one writer thread and wait for its ack. The
//! writer takes everything queued, appends it with one write and one fsync (the journal
//! folds it into its own copy of the state), then acknowledges each sender: every
//! finished operation is durable before it is reported done, and concurrent completions
//! share an fsync.

use std::sync::mpsc;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::state::{Journal, JournalEntry};

type Msg = (Vec<JournalEntry>, oneshot::Sender<Result<(), String>>);

#[derive(Clone)]
pub struct Recorder {
    tx: mpsc::Sender<Msg>,
}

pub struct RecorderHandle {
    thread: JoinHandle<(Journal, Option<String>)>,
}

impl Recorder {
    /// Start the writer over an open journal and the state it extends.
    pub fn start(journal: Journal) -> (Recorder, RecorderHandle) {
        let (tx, rx) = mpsc::channel::<Msg>();
        let thread = std::thread::spawn(move || writer(journal, rx));
        (Recorder { tx }, RecorderHandle { thread })
    }

    /// Record entries; returns once they are durable.
    pub async fn record(&self, entries: Vec<JournalEntry>) -> Result<(), String> {
        let (ack, done) = oneshot::channel();
        self.tx.send((entries, ack)).map_err(|_| "the state journal writer stopped".to_string())?;
        done.await.map_err(|_| "the state journal writer stopped".to_string())?
    }
}

impl RecorderHandle {
    /// Wait for the writer to drain (all `Recorder` clones must be dropped first).
    pub fn finish(self) -> Result<(Journal, Option<String>), String> {
        self.thread.join().map_err(|_| "the state journal writer panicked".to_string())
    }
}

fn writer(mut journal: Journal, rx: mpsc::Receiver<Msg>) -> (Journal, Option<String>) {
    let mut first_error: Option<String> = None;
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        // Moved, not cloned: a batch can hold thousands of resource configurations.
        let mut entries: Vec<JournalEntry> = Vec::with_capacity(batch.iter().map(|(e, _)| e.len()).sum());
        let mut acks = Vec::with_capacity(batch.len());
        for (e, ack) in batch {
            entries.extend(e);
            acks.push(ack);
        }
        let result = journal.append_owned(entries).map_err(|e| e.to_string());
        if result.is_err() && first_error.is_none() {
            first_error = result.clone().err();
        }
        for ack in acks {
            let _ = ack.send(result.clone());
        }
    }
    (journal, first_error)
}
