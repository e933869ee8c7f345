//! The engine an adoption labels nodes through.

use async_trait::async_trait;
use drover_controller::procedure::adopt::NodeLabels;
use drover_engine::Engine;
use drover_spi::{ClusterError, Fence};
use std::collections::BTreeMap;

/// A manager's engine, sending node updates under the adoption's fence.
pub struct EngineLabels<'a>(pub &'a Engine);

#[async_trait]
impl NodeLabels for EngineLabels<'_> {
    async fn label_node(
        &self,
        node: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn Fence,
    ) -> Result<(), ClusterError> {
        self.0
            .update_node_spec_fenced(node, fence, |s| {
                let l = s.labels.get_or_insert_with(Default::default);
                l.extend(labels.iter().map(|(k, v)| (k.clone(), v.clone())));
            })
            .await
            .map_err(ClusterError::from)
    }
}
