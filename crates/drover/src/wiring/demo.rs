//! The demo's machines: local-provider machines in the demo's directory.

use drover_local::{InstanceRecord, LocalProvider, procs};
use std::path::Path;
use std::time::Duration;

/// The machines under `machines` (a local provider's directory), by address.
pub fn demo_machines(machines: &Path) -> Vec<InstanceRecord> {
    let mut records = LocalProvider::new(machines, Vec::new())
        .ok()
        .and_then(|p| p.records().ok())
        .unwrap_or_default();
    records.sort_by(|a, b| a.address.cmp(&b.address));
    records
}

/// Stops everything the demo in `dir` started — its machines, and etcd by
/// the pid `demo up` recorded — and unmounts what is mounted under it.
/// `Err` with the pids of processes naming `dir` still running.
pub fn remove_demo(dir: &Path, etcd_pid: Option<i32>) -> Result<(), Vec<i32>> {
    drover_local::teardown(&dir.join("machines"));
    if let Some(pid) = etcd_pid {
        let needle = dir.join("etcd").display().to_string();
        procs::stop_tree(
            Some(pid),
            Some(pid),
            &needle,
            procs::Owned::Named,
            Duration::from_secs(10),
        );
    }
    let left = procs::pids_matching(&format!("{}/", dir.display()));
    if !left.is_empty() {
        return Err(left);
    }
    let _ = procs::unmount_under(dir);
    Ok(())
}
