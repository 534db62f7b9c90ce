//! Workspaces in an object store (DESIGN.md, "Team state"): the default workspace's state
//! is the object `key`, workspace W's is `env:/W/<key>`. Which workspaces exist is read
//! from the store, never kept anywhere else; deleting one removes its state and backup.

#![allow(clippy::result_large_err)]

use futures::TryStreamExt;
use object_store::ObjectStoreExt;
use object_store::path::Path as ObjectPath;

use super::{RemoteBackend, StateError, store_error};

/// The prefix every named workspace's objects live under.
const PREFIX: &str = "env:";

impl RemoteBackend {
    /// Whether this workspace's state object exists (one HEAD request).
    pub fn exists(&self) -> Result<bool, StateError> {
        let (store, key, url) = (self.inner.store.clone(), self.inner.key.clone(), self.inner.url.clone());
        self.block(async move {
            match store.head(&key).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => Ok(false),
                Err(e) => Err(store_error(&url, "look for", e)),
            }
        })
    }

    /// The named workspaces that have a state object (`env:/W/<key>` for this backend's
    /// `key`, which must be the default workspace's), sorted. The default workspace is
    /// not among them: it always exists.
    pub fn named_workspaces(&self) -> Result<Vec<String>, StateError> {
        let (store, key, url) = (self.inner.store.clone(), self.inner.key.to_string(), self.inner.url.clone());
        let found: Vec<ObjectPath> = self.block(async move {
            let prefix = ObjectPath::from(PREFIX);
            store
                .list(Some(&prefix))
                .map_ok(|meta| meta.location)
                .try_collect()
                .await
                .map_err(|e| store_error(&url, "list the workspaces of", e))
        })?;
        let mut names: Vec<String> = found.iter().filter_map(|p| workspace_of(p.as_ref(), &key)).collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Remove this workspace's state and its backup (under its lock, which the caller
    /// holds and then releases). Objects already gone are fine.
    pub(crate) fn delete_state(&self, lock: &crate::state::StateLock) -> Result<(), StateError> {
        self.check_lock(lock)?;
        for key in [self.inner.key.clone(), self.backup_key()] {
            let (store, url) = (self.inner.store.clone(), self.inner.url.clone());
            self.block(async move {
                match store.delete(&key).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                    Err(e) => Err(store_error(&url, "delete", e)),
                }
            })?;
        }
        Ok(())
    }
}

/// `W` when `location` is `env:/W/<key>` exactly (not its lock or backup, nor another key's).
fn workspace_of(location: &str, key: &str) -> Option<String> {
    let rest = location.strip_prefix(PREFIX)?.strip_prefix('/')?;
    let (name, tail) = rest.split_once('/')?;
    (tail == key && !name.is_empty()).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::workspace_of;

    #[test]
    fn only_the_state_objects_of_this_key_name_workspaces() {
        let key = "fleets/prod.json";
        assert_eq!(workspace_of("env:/staging/fleets/prod.json", key).as_deref(), Some("staging"));
        assert_eq!(workspace_of("env:/staging/fleets/prod.json.lock", key), None);
        assert_eq!(workspace_of("env:/staging/fleets/prod.json.backup", key), None);
        assert_eq!(workspace_of("env:/staging/other/prod.json", key), None);
        assert_eq!(workspace_of("fleets/prod.json", key), None);
    }
}
