//! An external controller: off the cluster, without an engine of its own,
//! over a store every controller reaches. It sees and acts on the swarm
//! through the providers' machines (as `apply`'s bootstrap does) and takes
//! its turn by the store's lease.

use super::Machines;
use crate::cli::StoreArgs;
use crate::error::MainError;
use drover_controller::Context;
use drover_core::control::Reach;
use std::time::Duration;

/// How often an external controller looks again with nothing to wake it.
const RESYNC: Duration = Duration::from_secs(1);

/// The context of an external controller named `name` (default
/// `external@HOST/PID`). Refused (exit 2) before anything is opened when
/// the store is one no other host reaches.
pub async fn external(
    name: Option<String>,
    store_args: &StoreArgs,
    machines: &Machines,
) -> Result<Context, MainError> {
    let reach = super::reach(store_args)?;
    if reach != Reach::Network {
        return Err(MainError::BadInput(format!(
            "--external needs a store every controller reaches, with the lease external \
             controllers take turns by: etcd (--store etcd://HOST:PORT); {}",
            reach.named()
        )));
    }
    let store = super::store_with(store_args, super::Open::OrCreate).await?;
    let identity = name.unwrap_or_else(|| {
        let host = super::own_host_name().unwrap_or_else(|| "localhost".into());
        format!("external@{host}/{}", std::process::id())
    });
    Ok(Context {
        providers: super::providers(machines, Some(&store)),
        cluster: super::off_cluster_swarm(machines),
        store,
        self_link: None,
        identity,
        store_url: Some(store_args.url.clone()),
        resync: RESYNC,
    })
}
