//! A store for tests whose writes fail on demand: object_store's in-memory store behind a
//! switch, so the remote backend's retry, stop and `errored.json` paths run without a
//! network. Only writes fail (puts and copies); reads always answer. One holder's lock
//! writes alone can be made to fail, so that it cannot renew while others can take over.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult, Result,
};

/// `fail_next(n)` makes the next `n` writes fail with a generic (transient-looking) error;
/// `usize::MAX` makes every write fail.
#[derive(Debug, Default)]
pub struct Flaky {
    inner: InMemory,
    failing: AtomicUsize,
    /// Puts that go through but whose answer is lost (a timeout after the store wrote).
    losing: AtomicUsize,
    /// Writes of a lock object that name this lock id fail: its holder is cut off from
    /// the store, others are not.
    cut_off: std::sync::Mutex<Option<String>>,
    pub writes: AtomicUsize,
}

impl Flaky {
    pub fn new() -> Arc<Flaky> {
        Arc::new(Flaky::default())
    }

    pub fn fail_next(&self, n: usize) {
        self.failing.store(n, Ordering::SeqCst);
    }

    pub fn lose_answers(&self, n: usize) {
        self.losing.store(n, Ordering::SeqCst);
    }

    /// Fail every write of a lock object holding the lock id `id` (`None`: none fail): the
    /// holder of that lock cannot renew it, and anyone else can take it over.
    pub fn cut_off(&self, id: Option<&str>) {
        *self.cut_off.lock().unwrap() = id.map(str::to_string);
    }

    fn is_cut_off(&self, location: &Path, payload: &PutPayload) -> bool {
        let cut = self.cut_off.lock().unwrap().clone();
        let Some(id) = cut.filter(|_| location.as_ref().ends_with(".lock")) else { return false };
        let body: Vec<u8> = payload.iter().flat_map(|b| b.iter().copied()).collect();
        String::from_utf8_lossy(&body).contains(&id)
    }

    fn check(&self) -> Result<()> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        let left = self.failing.load(Ordering::SeqCst);
        if left == 0 {
            return Ok(());
        }
        if left != usize::MAX {
            self.failing.store(left - 1, Ordering::SeqCst);
        }
        Err(object_store::Error::Generic { store: "Flaky", source: "503 Service Unavailable (injected)".into() })
    }
}

impl std::fmt::Display for Flaky {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Flaky")
    }
}

#[async_trait::async_trait]
impl ObjectStore for Flaky {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        if self.is_cut_off(location, &payload) {
            return Err(object_store::Error::Generic { store: "Flaky", source: "connection reset (injected)".into() });
        }
        self.check()?;
        let result = self.inner.put_opts(location, payload, opts).await;
        let losing = self.losing.load(Ordering::SeqCst);
        if losing > 0 && result.is_ok() {
            self.losing.store(losing - 1, Ordering::SeqCst);
            return Err(object_store::Error::Generic { store: "Flaky", source: "timed out (injected)".into() });
        }
        result
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        self.check()?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.check()?;
        self.inner.copy_opts(from, to, options).await
    }
}
