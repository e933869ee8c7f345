//! `import` on etcd: one txn, so an import cut short (the connection lost,
//! the request over etcd's size or operation limits) writes nothing.

use super::EtcdStore;
use crate::model::renumbered;
use drover_spi::{Imported, StoreError};
use etcd_client::{Compare, CompareOp, Txn, TxnOp};

impl EtcdStore {
    /// Puts the cluster id, the current revision, the newest `history`
    /// revisions (renumbered 1..) and the controls, if and only if the
    /// store holds neither a cluster id nor a revision.
    pub(super) async fn import_txn(&self, cluster: &Imported) -> Result<(), StoreError> {
        let (id_key, rev_key) = (self.key("cluster_id"), self.key("rev"));
        let revisions = renumbered(&cluster.revisions);
        let current = revisions.len() as u64;
        let keep_from = revisions.len().saturating_sub(self.limits.history.max(1));
        let mut ops = vec![
            TxnOp::put(id_key.as_str(), cluster.cluster_id.as_str(), None),
            TxnOp::put(rev_key.as_str(), current.to_string(), None),
            TxnOp::put(self.key("controls"), self.json(&cluster.controls), None),
        ];
        ops.extend(
            revisions[keep_from..]
                .iter()
                .map(|r| TxnOp::put(self.rev_key(r.rev), self.json(r), None)),
        );
        let empty = vec![
            Compare::version(id_key.as_str(), CompareOp::Equal, 0),
            Compare::version(rev_key.as_str(), CompareOp::Equal, 0),
        ];
        let resp = self
            .kv()
            .txn(Txn::new().when(empty).and_then(ops))
            .await
            .map_err(|e| self.etcd_err(e))?;
        if resp.succeeded() {
            return Ok(());
        }
        Err(StoreError::ClusterMismatch {
            current: self.cluster_id_text().await?,
            requested: cluster.cluster_id.clone(),
        })
    }

    /// The cluster id held, or empty (revisions without one).
    async fn cluster_id_text(&self) -> Result<String, StoreError> {
        Ok(drover_spi::Store::cluster_id(self)
            .await?
            .unwrap_or_default())
    }
}
