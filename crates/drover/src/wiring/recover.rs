//! `drover recover`'s wiring: the providers whose machines are the
//! evidence, where the recovery is recorded, and how the survivor's engine
//! and the audit store are reached; the procedure itself is
//! [`drover_controller::procedure::recover`].

use super::Machines;
use crate::cli::{RecoverArgs, StoreArgs};
use crate::error::MainError;
use async_trait::async_trait;
use drover_controller::procedure::recover::{
    self, EngineCallError, Outcome, Reach, Record, RecoverFailure, Request, SurvivorEngine,
};
use drover_core::model::SwarmView;
use drover_engine::Engine;
use drover_spi::{Fence, Store, StoreError, Unfenced};
use std::sync::Arc;
use std::time::Duration;

/// `drover recover`: the procedure over the configured providers. Bad
/// `--gone`/`--from` names are bad input; a recovery that fails midway is
/// a failure (exit 1). An operator's command holds no controller term: its
/// writes are fenced by nothing but the store's compare-and-swap.
pub async fn recover(args: &RecoverArgs) -> Result<Outcome, MainError> {
    let machines = super::existing_machines(&args.live.local)?;
    holds_machines(&args.live.local)?;
    let record = Record::in_dir(&record_dir(&machines)?);
    let reach = EngineReach {
        store: &args.live.store,
    };
    let request = Request {
        gone: args.gone.clone(),
        from: args.from.clone(),
        dry_run: args.dry_run,
    };
    // No store is opened before the recovery (its store may be the lost
    // raft's): the ssh provider's hosts are not asked.
    let providers = super::providers(&machines, None);
    recover::recover(&providers, &reach, &record, &request, &Unfenced)
        .await
        .map_err(|e| match e {
            RecoverFailure::BadInput(e) => MainError::BadInput(e.to_string()),
            other => MainError::Failed(anyhow::Error::from(other)),
        })
}

/// Where the recovery is recorded: the local provider's state directory,
/// else the directory of the incus provider's engine sockets (both on the
/// host the engines are reached from).
/// A `--local-dir` whose provider has no machine at all gives recover
/// nothing to judge by: almost surely the wrong directory.
fn holds_machines(args: &crate::cli::LocalArgs) -> Result<(), MainError> {
    let Some(dir) = &args.local_dir else {
        return Ok(());
    };
    let instances = dir.join(drover_local::INSTANCES_DIR);
    let any = std::fs::read_dir(&instances).is_ok_and(|mut d| d.next().is_some());
    if !any {
        return Err(MainError::BadInput(format!(
            "--local-dir {}: the local provider there holds no machines, so there is nothing to recover from; check the path (or DROVER_LOCAL_DIR)",
            dir.display()
        )));
    }
    Ok(())
}

fn record_dir(machines: &Machines) -> Result<std::path::PathBuf, MainError> {
    if let Some(l) = &machines.local {
        return Ok(l.state_dir().to_path_buf());
    }
    if let Some(i) = &machines.incus {
        return Ok(i.engine_dir().to_path_buf());
    }
    Err(MainError::BadInput(
        "recover judges by the provider's machines: give --local-dir (or DROVER_LOCAL_DIR)".into(),
    ))
}

/// The engines over their docker endpoints, and the store named by
/// `--store` (a swarm store read through the survivor).
struct EngineReach<'a> {
    store: &'a StoreArgs,
}

#[async_trait]
impl Reach for EngineReach<'_> {
    async fn connect(&self, endpoint: &str) -> Result<Arc<dyn SurvivorEngine>, EngineCallError> {
        let engine = Engine::connect_with_timeout(endpoint, Duration::from_secs(5)).await?;
        Ok(Arc::new(Survivor(engine)))
    }

    async fn audit_store(&self, survivor: &str) -> Result<Arc<dyn Store>, StoreError> {
        let args = StoreArgs {
            url: if self.store.url.starts_with("swarm") {
                format!("swarm:{survivor}")
            } else {
                self.store.url.clone()
            },
            store_timeout: self.store.store_timeout,
        };
        super::store(&args)
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))
    }
}

/// A survivor's engine.
struct Survivor(Engine);

#[async_trait]
impl SurvivorEngine for Survivor {
    fn endpoint(&self) -> &str {
        self.0.endpoint()
    }

    async fn observe(&self) -> SwarmView {
        self.0.observe().await
    }

    async fn force_new_cluster(
        &self,
        addr: &str,
        fence: &dyn Fence,
    ) -> Result<(), EngineCallError> {
        fence.check()?;
        self.0.force_new_cluster(addr).await?;
        Ok(())
    }

    async fn remove_node(&self, node: &str, fence: &dyn Fence) -> Result<(), EngineCallError> {
        Ok(self.0.remove_node(node, false, fence).await?)
    }
}
