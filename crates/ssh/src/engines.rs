//! The enrolled hosts' engines asked now, through the sockets forwarded
//! over their connections (the provider seam's
//! [`InstanceProvider::ask_engines`](drover_spi::InstanceProvider::ask_engines)):
//! a host that answered has a running machine, its engine asked; a host
//! that did not is unknown, its engine silent (never down: design rule 13).

use crate::SshProvider;
use drover_core::verdict::machine::{Power, engine_answer};
use drover_spi::{EngineReport, ProviderError};
use std::collections::BTreeMap;

impl SshProvider {
    /// Every enrolled host carrying `tags` (a fresh listing), its engine
    /// asked now (all at once).
    pub(crate) async fn engines_now(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<EngineReport>, ProviderError> {
        let listed = self.listing(true).await?;
        let asked = listed
            .into_iter()
            .filter(|l| l.record.matches(tags))
            .map(|l| async move {
                let instance = l.record.instance();
                let address = l.target.login.host.advertise_address.clone();
                if !l.answered {
                    return EngineReport {
                        address,
                        ..EngineReport::unreachable(instance)
                    };
                }
                let endpoint = format!(
                    "unix://{}",
                    self.links.engine_socket(&l.target.name()).display()
                );
                let (answer, raft) = drover_engine::probe::ask(&endpoint).await;
                EngineReport {
                    instance,
                    address,
                    answer: engine_answer(Power::Running, Some(answer)),
                    raft,
                }
            });
        Ok(futures_util::future::join_all(asked).await)
    }
}
