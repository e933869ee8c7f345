//! Who holds a file store: a small record next to the file
//! (`state.db.holder`), written by the process that opens it for writing
//! and removed when it closes, so a process refused the file can say at
//! once who holds it and what to do instead of waiting or guessing.
//!
//! The record is advice, not the lock (redb's file lock is): one left by a
//! process that crashed is overwritten by the next writer and never stops
//! anyone. It holds the command line with every value that could be a
//! secret masked ([`redacted`]), and is created mode 0600 like the store.

use serde::{Deserialize, Serialize};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The holder of a file store, as recorded beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// The holding process.
    pub pid: u32,
    /// Its command line, secrets masked.
    pub command: String,
    /// When it opened the store (ms since the epoch).
    pub since_ms: u64,
}

impl Holder {
    /// This process, holding the store from now.
    pub fn this_process() -> Holder {
        let argv: Vec<String> = std::env::args().collect();
        Holder {
            pid: std::process::id(),
            command: redacted(&argv),
            since_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        }
    }
}

/// The record's path: the store's with `.holder` appended.
pub fn record_path(store: &Path) -> PathBuf {
    let mut name = store.as_os_str().to_owned();
    name.push(".holder");
    PathBuf::from(name)
}

/// The record beside `store`, if one is there and readable.
pub fn read(store: &Path) -> Option<Holder> {
    let text = std::fs::read(record_path(store)).ok()?;
    serde_json::from_slice(&text).ok()
}

/// The record of this process as the holder of `store`; removed when
/// dropped (if it still names this process).
#[derive(Debug)]
pub struct Record {
    path: PathBuf,
    pid: u32,
}

impl Record {
    /// Writes `holder` beside `store` (mode 0600, replacing a stale one).
    /// A record that cannot be written only makes a refusal less precise,
    /// so it is not an error.
    pub fn write(store: &Path, holder: &Holder) -> Record {
        let path = record_path(store);
        let _ = std::fs::remove_file(&path);
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            let _ = f.write_all(&serde_json::to_vec(holder).unwrap_or_default());
        }
        Record {
            path,
            pid: holder.pid,
        }
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        // A later writer's record (after this one's was removed) stays.
        if read(&self.path.with_extension("")).is_some_and(|h| h.pid == self.pid) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The refusal of a process that could not open the file store at `store`
/// because `holder` (if recorded) has it open for writing.
pub fn refusal(store: &Path, holder: Option<&Holder>) -> String {
    let who = match holder {
        Some(h) => format!(
            "is held by pid {} (`{}`) since {}",
            h.pid,
            h.command,
            utc_text(h.since_ms)
        ),
        None => "is held by another process (it left no holder record)".into(),
    };
    format!(
        "file store {} {who}: a file store serves one controller or one changing command at a \
         time; stop it, or use an etcd store to run commands beside controllers (status, events, \
         history and plan --store read it beside a controller)",
        store.display()
    )
}

/// Words in a flag's name (or an option's) whose value is masked.
const SECRET_WORDS: &[&str] = &["token", "password", "passwd", "secret", "credential"];

fn names_a_secret(flag: &str) -> bool {
    let flag = flag.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| flag.contains(w))
}

/// `argv` as one line with what could be a secret masked as `***`: the
/// value of a flag whose name says token, password, secret or credential
/// (`--x-token=V` or `--x-token V`), and the user part of a URL
/// (`etcd://user:pw@host`). drover takes no secret on its command line,
/// but a holder record outlives the process and anyone may mistype one.
pub fn redacted(argv: &[String]) -> String {
    let mut out = Vec::with_capacity(argv.len());
    let mut mask_next = false;
    for arg in argv {
        let shown = if std::mem::take(&mut mask_next) && !arg.starts_with('-') {
            "***".to_string()
        } else if let Some((flag, _)) = arg.split_once('=').filter(|(f, _)| f.starts_with('-')) {
            match names_a_secret(flag) {
                true => format!("{flag}=***"),
                false => without_userinfo(arg),
            }
        } else {
            mask_next = arg.starts_with('-') && names_a_secret(arg);
            without_userinfo(arg)
        };
        out.push(shown);
    }
    out.join(" ")
}

/// `arg` with a URL's `user:password@` masked.
fn without_userinfo(arg: &str) -> String {
    let Some(at_scheme) = arg.find("://") else {
        return arg.to_string();
    };
    let rest = &arg[at_scheme + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{}://***{}", &arg[..at_scheme], &rest[at..]),
        None => arg.to_string(),
    }
}

/// `ms` since the epoch as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc_text(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, day_secs) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_date(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        day_secs / 3600,
        day_secs % 3600 / 60,
        day_secs % 60
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01 (H. Hinnant's
/// `civil_from_days`).
fn civil_date(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split(' ').map(String::from).collect()
    }

    #[test]
    fn a_command_line_keeps_its_shape_and_loses_its_secrets() {
        let line = "drover controller --engine unix:///var/run/docker.sock \
                    --store etcds://alice:s3cret@10.0.0.1:2379?prefix=/d \
                    --join-token SWMTKN-1-abc --api-password=hunter2 --wait";
        let shown = redacted(&args(line));
        assert_eq!(
            shown,
            "drover controller --engine unix:///var/run/docker.sock \
             --store etcds://***@10.0.0.1:2379?prefix=/d --join-token *** \
             --api-password=*** --wait"
        );
        for secret in ["s3cret", "alice", "SWMTKN", "hunter2"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }

    #[test]
    fn a_flag_naming_a_secret_masks_only_its_value() {
        assert_eq!(
            redacted(&args("drover x --token --wait")),
            "drover x --token --wait"
        );
        assert_eq!(
            redacted(&args("drover apply --store file:///a@b/state.db")),
            "drover apply --store file:///a@b/state.db"
        );
    }

    #[test]
    fn times_read_as_utc_dates() {
        assert_eq!(utc_text(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_text(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc_text(1_767_225_731_000), "2026-01-01 00:02:11 UTC");
    }

    #[test]
    fn a_refusal_names_the_holder_and_what_to_do() {
        let h = Holder {
            pid: 1234,
            command: "drover controller --engine unix:///run/docker.sock".into(),
            since_ms: 36_131_000,
        };
        let m = refusal(Path::new("/x.db"), Some(&h));
        assert!(
            m.starts_with(
                "file store /x.db is held by pid 1234 (`drover controller --engine \
                 unix:///run/docker.sock`) since 1970-01-01 10:02:11 UTC: "
            ),
            "{m}"
        );
        assert!(m.contains("stop it, or use an etcd store"), "{m}");
        let m = refusal(Path::new("/x.db"), None);
        assert!(m.contains("held by another process"), "{m}");
    }

    #[test]
    fn a_record_lives_beside_the_store_until_its_holder_drops_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("s.db");
        let h = Holder {
            pid: std::process::id(),
            command: "drover".into(),
            since_ms: 5,
        };
        let record = Record::write(&store, &h);
        assert_eq!(read(&store), Some(h));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(record_path(&store))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        drop(record);
        assert_eq!(read(&store), None);
        assert!(!record_path(&store).exists());
    }
}
