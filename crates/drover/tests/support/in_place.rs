//! Updates in place on the local provider's machines (`e2e_in_place`,
//! `e2e_crash_in_place`): the cluster file, an update command that records
//! what the swarm said of its member while it ran, and what it recorded.

use super::Lab;
use std::collections::BTreeMap;
use std::path::Path;

/// The cluster file: 3 pet managers with a spare slot, 2 workers, both
/// updated in place by `command` within `timeout`.
pub fn spec(lab: &Lab, command: &str, timeout: &str) -> String {
    let n = lab.net;
    let update = format!(
        "  update:\n    strategy: in_place\n    watch: 2s\n    in_place:\n      command: {command:?}\n      timeout: {timeout}\n  health: {{startup_timeout: 60s}}\n"
    );
    let managers = lab.pet_managers();
    let text = format!(
        "groups:
{managers}    spare_ids: [127.0.{n}.14]
  instance: {{provider: local}}
{update}- name: workers
  role: worker
  allocation: {{size: 2}}
  instance: {{provider: local}}
{update}"
    );
    let path = lab.dir.join("spec.yaml");
    std::fs::write(&path, text).expect("write spec");
    path.to_str().expect("UTF-8").to_string()
}

/// An update command that records, on this host, what the swarm said of
/// the member while its update ran: whether its node was a raft member and
/// its availability, asked of whichever of the lab's engines answers as a
/// manager (`DOCKER_HOST` names the member's own engine), then sleeps 3 s.
/// In a raw block: the Go templates' braces are not drover's.
pub fn record(log: &Path, release: &str) -> String {
    format!(
        "{{% raw %}}id=$(docker info --format '{{{{.Swarm.NodeID}}}}'); r=unknown; \
         for s in $(find {dir} -name sock -type s); do \
         r=$(docker -H unix://$s node inspect $id --format '{{{{if .ManagerStatus}}}}true{{{{else}}}}false{{{{end}}}} {{{{.Spec.Availability}}}}' 2>/dev/null) && break; \
         done; echo \"{release} $DROVER_INSTANCE $r\" >> {log}; sleep 3{{% endraw %}}",
        dir = log.parent().expect("the lab's dir").display(),
        log = log.display()
    )
}

/// What one run of [`record`]'s command wrote: its release, its machine,
/// whether its node was a raft member (`true`/`false`) and its availability.
#[derive(Debug)]
pub struct Update {
    pub release: String,
    pub instance: String,
    pub manager: String,
    pub availability: String,
}

/// Every run [`record`]'s commands wrote to `log`, in order.
pub fn updates(log: &Path) -> Vec<Update> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            Some(Update {
                release: f.first()?.to_string(),
                instance: f.get(1)?.to_string(),
                manager: f.get(2)?.to_string(),
                availability: f.get(3)?.to_string(),
            })
        })
        .collect()
}

/// Every running machine, by id, with its group.
pub fn machines(lab: &Lab) -> BTreeMap<String, String> {
    let provider = lab.provider();
    lab.records()
        .into_iter()
        .filter(|r| provider.is_running(r))
        .map(|r| {
            let group = r.tags.get("drover.group").cloned().unwrap_or_default();
            (r.id, group)
        })
        .collect()
}
