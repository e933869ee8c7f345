//! Every engine of a state directory stopped and the directory removed:
//! what `drover demo down` and the tests' guards do.

use crate::{EnginePaths, InstanceRecord, group_leader, launcher, procs};
use std::path::Path;

/// Stops every engine recorded under `state_dir` (by PID, verified by
/// command line, with everything its boot script started), unmounts what
/// they left and removes the directory: what `drover demo down` and the
/// tests' guards do. Engines are stopped in parallel.
pub fn teardown(state_dir: &Path) {
    let dirs: Vec<_> = std::fs::read_dir(state_dir.join("instances"))
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    let handles: Vec<_> = dirs
        .into_iter()
        .map(|dir| {
            std::thread::spawn(move || {
                let rec: Option<InstanceRecord> =
                    std::fs::read_to_string(dir.join("instance.json"))
                        .ok()
                        .and_then(|t| serde_json::from_str(&t).ok());
                let engine_dir = rec.as_ref().and_then(|r| r.engine_dir.clone());
                let paths = EnginePaths::new(engine_dir.as_deref().unwrap_or(&dir));
                let (pid, pgid) = rec
                    .map(|r| (group_leader(&r, &paths), r.pgid))
                    .unwrap_or((None, None));
                launcher::stop_engine(&paths, pid, pgid, procs::Owned::Named);
                let _ = procs::remove_instance_dir(&paths.dir);
                let _ = procs::remove_instance_dir(&dir);
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
    let _ = procs::unmount_under(state_dir);
    let _ = std::fs::remove_dir_all(state_dir);
}
