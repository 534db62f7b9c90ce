//! `gpuplan state rekey` on an object store: the backup object written again with the
//! backend's keys (docs/design/secrets.md, "Encryption at rest").

#![allow(clippy::result_large_err)]

use std::path::PathBuf;

use object_store::{ObjectStoreExt, PutPayload};

use super::store::store_error;
use super::{RemoteBackend, seal_head};
use crate::state::StateError;
use crate::state::parse::parse_state;

impl RemoteBackend {
    /// `gpuplan state rekey`: the backup object written again with these keys (sealed, or
    /// in the plain envelope without an `encryption` block), its serial unchanged. Under
    /// the lock; `false` when there is no backup.
    pub fn rekey_backup(&self, lock: &crate::state::StateLock) -> Result<bool, StateError> {
        self.check_lock(lock)?;
        let backup_url = PathBuf::from(self.backup_url());
        let Some((bytes, _)) = self.get(&self.backup_key(), "read the backup of")? else { return Ok(false) };
        let state = parse_state(&backup_url, &backup_url, &bytes, &self.keys)?;
        let mut text = Vec::with_capacity(bytes.len() * 4);
        crate::state::pretty::write_state(&mut text, &state).map_err(|e| self.encode_error(e.to_string()))?;
        let body = if self.keys.seals() {
            crate::state::seal::seal(&text, "state", seal_head(&state), &self.keys)
                .map_err(|e| StateError::encrypt(&backup_url, e))?
        } else {
            crate::state::envelope::encode(&text, &state, state.serial, state.format_version)
                .map_err(|e| self.encode_error(e.to_string()))?
        };
        let (store, key, url) = (self.inner.store.clone(), self.backup_key(), self.inner.url.clone());
        self.block(async move {
            store
                .put(&key, PutPayload::from(body))
                .await
                .map(|_| ())
                .map_err(|e| store_error(&url, "write the backup of", e))
        })?;
        Ok(true)
    }
}
