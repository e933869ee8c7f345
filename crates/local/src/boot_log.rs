//! A local machine's boot log (`boot.log` in its directory: its boot
//! script's output, as cloud-init's would be on a VM) and its engine's
//! swarm state, for a machine that has not joined
//! ([`InstanceProvider::boot_log`](drover_spi::InstanceProvider::boot_log)).

use crate::{LocalProvider, io_err};
use drover_core::boot::BootLog;
use drover_spi::ProviderError;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// How much of a log's end is read: far more than its tail keeps
/// ([`drover_core::boot::TAIL_BYTES`]), so a tail is never cut short by
/// the read, and bounded however long the log grew.
const READ_BYTES: u64 = 64 * 1024;

impl LocalProvider {
    /// The tail of machine `id`'s boot log, redacted; `None` when it has
    /// none (an adopted engine was booted by no script of ours).
    pub(crate) fn boot_log_of(&self, id: &str) -> Result<Option<BootLog>, ProviderError> {
        let rec = self
            .record(id)
            .map_err(|e| io_err("reading instance record", e))?
            .ok_or_else(|| ProviderError::NotFound(id.to_string()))?;
        let path = self.dir_of(&rec.id).join("boot.log");
        match read_end(&path) {
            Ok(text) => Ok(Some(BootLog::tail(&text))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err("reading boot.log", e)),
        }
    }
}

/// The last [`READ_BYTES`] of the file at `path`, from a line start.
fn read_end(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let from = len.saturating_sub(READ_BYTES);
    f.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::new();
    f.take(READ_BYTES).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Ok(match (from > 0, text.split_once('\n')) {
        // Started mid-line: that line's end alone is dropped.
        (true, Some((_, rest))) => rest.to_string(),
        _ => text,
    })
}

#[cfg(test)]
mod tests {
    use super::read_end;

    /// A long log is read from a line start within the bound.
    #[test]
    fn the_end_of_a_long_log_starts_on_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("boot.log");
        let text: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&p, &text).unwrap();
        let end = read_end(&p).unwrap();
        assert!(
            end.len() <= 64 * 1024 && end.starts_with("line "),
            "{}",
            &end[..20]
        );
        assert!(end.ends_with("line 19999\n"));
        std::fs::write(&p, "short\n").unwrap();
        assert_eq!(read_end(&p).unwrap(), "short\n");
    }
}
