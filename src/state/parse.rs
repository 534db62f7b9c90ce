//! Decoding a state file's bytes into a [`State`]: every defect a [`StateError::Corrupt`]
//! with its line and column, a newer format named as such, and a key that is not an
//! address a [`StateError::BadAddress`]. Shared by the local and the remote backend.

use std::path::Path;

use serde::Deserialize;

use super::error::StateError;
use super::model::{FORMAT_VERSION, State};
use super::seal::Keyring;

/// Decode a state file, turning every defect into [`StateError::Corrupt`], and a key
/// that is not an address into [`StateError::BadAddress`]. A remote object's envelope is
/// opened first (`super::envelope`), wherever the bytes came from (`state push` of a
/// downloaded object too); a format this gpuplan migrates is upgraded (`super::migrate`).
///
/// A sealed file (`super::seal`) is opened with `keys` first; one that no key opens is a
/// [`StateError::Decrypt`], never a corrupt state.
pub(crate) fn parse_state(path: &Path, backup: &Path, bytes: &[u8], keys: &Keyring) -> Result<State, StateError> {
    if super::seal::is_sealed(bytes) {
        let text = super::seal::open(bytes, keys).map_err(|e| StateError::decrypt(path, e))?;
        return parse_state(path, backup, &text, &Keyring::default());
    }
    let corrupt = |line, column, message| StateError::Corrupt {
        path: path.to_path_buf(),
        line,
        column,
        message,
        backup: backup.to_path_buf(),
    };
    let bytes = &*super::envelope::decode(bytes).map_err(|message| corrupt(None, None, message))?;
    match crate::json_text::from_json_bytes::<State>(bytes) {
        Ok(state) if super::migrate::readable(state.format_version) => match state.bad_address() {
            None => Ok(super::migrate::upgrade(state)),
            Some(e) => Err(StateError::BadAddress {
                path: path.to_path_buf(),
                key: e.input,
                reason: e.reason,
                backup: backup.to_path_buf(),
            }),
        },
        Ok(state) => Err(unreadable_version(path, backup, state.format_version)),
        Err(e) => {
            // A newer format may not fit today's struct: say "newer gpuplan", not "bad field".
            #[derive(Deserialize)]
            struct Version {
                format_version: u32,
            }
            match serde_json::from_slice::<Version>(bytes) {
                Ok(v) if !super::migrate::readable(v.format_version) => {
                    Err(unreadable_version(path, backup, v.format_version))
                }
                _ => {
                    let message = e.to_string();
                    let suffix = format!(" at line {} column {}", e.line(), e.column());
                    let message = message.strip_suffix(&suffix).unwrap_or(&message).to_string();
                    Err(corrupt(Some(e.line()), Some(e.column()), message))
                }
            }
        }
    }
}

/// The error for a state of a format this gpuplan does not read: [`StateError::Newer`]
/// for a newer one (upgrade gpuplan), [`StateError::Corrupt`] for any other.
pub(super) fn unreadable_version(path: &Path, backup: &Path, version: u32) -> StateError {
    if version > FORMAT_VERSION {
        StateError::Newer { path: path.to_path_buf(), message: unsupported(version) }
    } else {
        StateError::Corrupt {
            path: path.to_path_buf(),
            line: None,
            column: None,
            message: unsupported(version),
            backup: backup.to_path_buf(),
        }
    }
}

pub(super) fn unsupported(version: u32) -> String {
    if version > FORMAT_VERSION {
        format!("format_version {version} was written by a newer gpuplan (this one reads {FORMAT_VERSION})")
    } else {
        format!("format_version {version} is not supported (this gpuplan reads {FORMAT_VERSION})")
    }
}
