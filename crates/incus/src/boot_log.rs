//! An Incus machine's boot log: cloud-init's output (the boot script's
//! own, `/var/log/cloud-init-output.log`, read through the files API),
//! else the instance's console log (`GET …/console?type=log`), its tail
//! redacted here, before it leaves the adapter
//! ([`InstanceProvider::boot_log`](drover_spi::InstanceProvider::boot_log)).

use crate::api::ApiError;
use crate::{IncusProvider, provider_error};
use drover_core::boot::BootLog;
use drover_spi::ProviderError;

/// Where cloud-init writes what the boot script printed.
pub const CLOUD_INIT_OUTPUT: &str = "/var/log/cloud-init-output.log";

/// How much of a log's end is kept before its tail is cut
/// ([`BootLog::tail`] keeps far less).
const KEEP_BYTES: usize = 64 * 1024;

impl IncusProvider {
    /// The tail of machine `name`'s boot log: cloud-init's output when the
    /// machine has it, else its console log; `None` when it has neither yet.
    pub(crate) async fn boot_log_of(&self, name: &str) -> Result<Option<BootLog>, ProviderError> {
        let files = format!("/1.0/instances/{name}/files");
        let console = format!("/1.0/instances/{name}/console");
        let asked = [
            (files.as_str(), ("path", CLOUD_INIT_OUTPUT)),
            (console.as_str(), ("type", "log")),
        ];
        for (path, query) in asked {
            match self.api.get_raw(path, &[query]).await {
                Ok(bytes) => return Ok(Some(BootLog::tail(&end_of(&bytes)))),
                // Not written yet (cloud-init not started), or no console
                // log for this kind of instance: try the next.
                Err(e) if e.is_not_found() || is_unsupported(&e) => {}
                Err(e) => return Err(provider_error(&format!("reading {name}'s boot log"), e)),
            }
        }
        Ok(None)
    }
}

/// Incus refuses a console log for an instance type without one (400).
fn is_unsupported(e: &ApiError) -> bool {
    matches!(e, ApiError::Status { status: 400, .. })
}

/// The last [`KEEP_BYTES`] of `bytes` as text, from a line start.
fn end_of(bytes: &[u8]) -> String {
    let from = bytes.len().saturating_sub(KEEP_BYTES);
    let text = String::from_utf8_lossy(&bytes[from..]);
    match (from > 0, text.split_once('\n')) {
        (true, Some((_, rest))) => rest.to_string(),
        _ => text.into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::end_of;

    #[test]
    fn the_end_of_a_long_log_starts_on_a_line() {
        let text: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        let end = end_of(text.as_bytes());
        assert!(end.len() <= 64 * 1024 && end.starts_with("line "));
        assert!(end.ends_with("line 19999\n"));
        assert_eq!(end_of(b"short\n"), "short\n");
    }
}
