//! The ssh provider's wiring: its connections (`--ssh-dir`), the provider
//! made for a store (its inventories are the cluster's, read from it), and
//! the check `apply` makes of the files its hosts are logged in to with.

use super::Machines;
use crate::cli::LocalArgs;
use crate::error::MainError;
use async_trait::async_trait;
use drover_spi::{InstanceProvider, Store};
use drover_ssh::link::Links;
use drover_ssh::{SshProvider, StoreInventory};
use std::sync::Arc;

/// The ssh provider's connections, when `--ssh-dir` is given (the
/// directory made if missing, this user's only).
pub(super) fn links(args: &LocalArgs) -> Result<Option<Arc<Links>>, MainError> {
    let Some(dir) = &args.ssh_dir else {
        return Ok(None);
    };
    Links::new(dir)
        .map(|links| Some(Arc::new(links)))
        .map_err(|e| MainError::BadInput(format!("--ssh-dir {}: {e}", dir.display())))
}

/// The ssh provider over `links`, its inventories read from `store` (the
/// cluster's; without one it lists nothing, and says why).
pub(super) fn provider(
    links: &Arc<Links>,
    store: Option<&Arc<dyn Store>>,
) -> Arc<dyn InstanceProvider> {
    let inventory: Arc<dyn drover_ssh::Inventory> = match store {
        Some(store) => Arc::new(StoreInventory::new(store.clone())),
        None => Arc::new(NoStore),
    };
    Arc::new(SshProvider::new(links.clone(), inventory))
}

/// Refuses (bad input, naming the field) a spec whose ssh groups name a
/// key file, agent or known_hosts file this host lacks, when this command
/// line configures the ssh provider (`--ssh-dir`): this process would log
/// in to their hosts (a bootstrap's first manager), and every controller
/// with `--ssh-dir` needs the same files.
pub fn ssh_files(
    spec: &drover_core::spec::ClusterSpec,
    machines: &Machines,
) -> Result<(), MainError> {
    use drover_core::spec::{SSH_PROVIDER, ssh::SshProperties};
    if machines.ssh.is_none() {
        return Ok(());
    }
    let groups = spec.groups.iter().enumerate();
    for (i, g) in groups.filter(|(_, g)| g.instance.provider == SSH_PROVIDER) {
        let Ok(props) = SshProperties::parse(&g.instance.properties) else {
            continue;
        };
        // The files are the group's: one host's login checks them.
        if let Some(t) = drover_ssh::inventory::Target::of(&props, true).first() {
            drover_ssh::link::preflight(&t.login)
                .map_err(|e| MainError::BadInput(format!("groups[{i}].{e}")))?;
        }
    }
    Ok(())
}

/// The ssh provider's inventory where no store was opened: unknown.
struct NoStore;

#[async_trait]
impl drover_ssh::Inventory for NoStore {
    async fn declared(&self) -> Result<drover_ssh::Declared, String> {
        Err("the ssh provider's inventories are the cluster's, in its store, and this command opened none".into())
    }
}
