//! Progress reporting during apply: a bar on a terminal, plain lines otherwise
//! (CI logs), nothing for benchmarks. Always on stderr.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub trait Progress: Send + Sync {
    fn start(&self, total: usize);
    /// Something happened to one resource (started, a batch done, a fallback).
    fn event(&self, address: &str, message: &str);
    /// One resource finished (successfully or not).
    fn finished(&self, address: &str, message: &str);
    fn done(&self);
}

/// One line per event, for non-terminals (CI logs, files).
///
/// Lines are gathered and written by a flusher thread at most [`FLUSH_EVERY`] after they
/// were made, and all of them at [`done`](Progress::done) (or when dropped): a
/// 100,000-pool apply makes 200,000 lines, and one write each (stderr is unbuffered) was
/// about 5 % of the apply's CPU. Each line is written whole, in the order made. Without
/// the thread (it could not be started) each line is written as it is made.
pub struct Lines {
    shared: Arc<Shared>,
    flusher: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// How long a line may wait before it is written.
pub const FLUSH_EVERY: Duration = Duration::from_millis(50);

struct Shared {
    pending: Mutex<Pending>,
    wake: Condvar,
}

struct Pending {
    text: String,
    /// Where lines go: stderr, or a test's buffer.
    out: Box<dyn Write + Send>,
    /// No flusher runs (ended, or never started): lines are written as they are made.
    direct: bool,
}

impl Pending {
    fn write_out(&mut self) {
        if self.text.is_empty() {
            return;
        }
        // Progress is best effort, as the terminal bar is: a stderr that cannot be written
        // (a closed pipe) must not fail or stop the apply whose outcome is in the journal.
        let _ = self.out.write_all(self.text.as_bytes()).and_then(|()| self.out.flush());
        self.text.clear();
    }
}

impl Lines {
    pub fn new() -> Lines {
        Lines::to(Box::new(std::io::stderr()))
    }

    /// Lines written to `out` instead of stderr.
    pub fn to(out: Box<dyn Write + Send>) -> Lines {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending { text: String::new(), out, direct: false }),
            wake: Condvar::new(),
        });
        let theirs = shared.clone();
        let flusher = std::thread::Builder::new().name("gpuplan-progress".into()).spawn(move || flush_every(&theirs));
        let flusher = match flusher {
            Ok(handle) => Some(handle),
            Err(_) => {
                // No thread: each line is written as it is made, as before.
                shared.lock().direct = true;
                None
            }
        };
        Lines { shared, flusher: Mutex::new(flusher) }
    }

    fn line(&self, address: &str, message: &str) {
        let mut pending = self.shared.lock();
        pending.text.push_str(address);
        pending.text.push_str(": ");
        pending.text.push_str(message);
        pending.text.push('\n');
        if pending.direct {
            pending.write_out();
        }
    }

    /// Write what is gathered and stop the flusher; later lines are written as made.
    fn finish(&self) {
        let handle = self.flusher.lock().unwrap_or_else(|e| e.into_inner()).take();
        self.shared.lock().direct = true;
        self.shared.wake.notify_all();
        if let Some(handle) = handle {
            // The flusher only writes; should it have panicked, what it held is written below.
            let _ = handle.join();
        }
        self.shared.lock().write_out();
    }
}

impl Default for Lines {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        // The text is appended whole under the lock: a poisoned lock still holds whole lines.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The flusher: write what was gathered every [`FLUSH_EVERY`], until lines go direct. It
/// writes under the lock, so a line made meanwhile waits and the order holds.
fn flush_every(shared: &Shared) {
    let mut pending = shared.lock();
    while !pending.direct {
        pending = shared.wake.wait_timeout(pending, FLUSH_EVERY).unwrap_or_else(|e| e.into_inner()).0;
        pending.write_out();
    }
}

impl Progress for Lines {
    fn start(&self, _: usize) {}
    fn event(&self, address: &str, message: &str) {
        self.line(address, message);
    }
    fn finished(&self, address: &str, message: &str) {
        self.line(address, message);
    }
    fn done(&self) {
        self.finish();
    }
}

pub struct Quiet;

impl Progress for Quiet {
    fn start(&self, _: usize) {}
    fn event(&self, _: &str, _: &str) {}
    fn finished(&self, _: &str, _: &str) {}
    fn done(&self) {}
}

/// An indicatif bar; finished resources are printed above it.
pub struct Bar {
    bar: Mutex<Option<ProgressBar>>,
}

impl Bar {
    pub fn new() -> Self {
        Bar { bar: Mutex::new(None) }
    }
}

impl Default for Bar {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress for Bar {
    fn start(&self, total: usize) {
        let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {wide_msg}")
        {
            bar.set_style(style);
        }
        if let Ok(mut b) = self.bar.lock() {
            *b = Some(bar);
        }
    }
    fn event(&self, address: &str, message: &str) {
        if let Ok(b) = self.bar.lock()
            && let Some(bar) = b.as_ref()
        {
            bar.set_message(format!("{address}: {message}"));
        }
    }
    fn finished(&self, address: &str, message: &str) {
        if let Ok(b) = self.bar.lock()
            && let Some(bar) = b.as_ref()
        {
            bar.println(format!("{address}: {message}"));
            bar.inc(1);
        }
    }
    fn done(&self) {
        if let Ok(b) = self.bar.lock()
            && let Some(bar) = b.as_ref()
        {
            bar.finish_and_clear();
        }
    }
}
