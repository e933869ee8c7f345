//! Terms in etcd: the `epoch` key, never leased, and the `leader` record
//! under an etcd lease kept alive by the holder's process. A campaign takes
//! the term whoever holds it (a manager's controller whose engine leads);
//! an acquisition only while no lease lives (external controllers taking
//! turns); a resignation ends the lease at once.

use super::{EtcdStore, LeaderRecord, value_is};
use drover_spi::{Epoch, StoreError};
use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};
use std::time::Duration;

/// Whether a campaign takes the term from a live holder.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Election {
    /// Whoever holds it.
    Take,
    /// Only while no lease lives.
    WhenFree,
}

impl EtcdStore {
    /// A new term for `holder` under a new lease, or `None` when `how` is
    /// [`Election::WhenFree`] and a live lease holds the `leader` record.
    /// One txn: the epoch as read, and the `leader` record as read (absent,
    /// when only a free term may be won), so of two campaigns racing at
    /// most one wins each epoch.
    pub(super) async fn elect(
        &self,
        holder: &str,
        how: Election,
    ) -> Result<Option<Epoch>, StoreError> {
        let (epoch_key, leader_key) = (self.key("epoch"), self.key("leader"));
        if how == Election::WhenFree && self.get(&leader_key).await?.is_some() {
            return Ok(None);
        }
        let ttl = i64::try_from(self.lease_ttl.as_secs().max(1)).unwrap_or(5);
        let lease = self
            .client
            .lease_client()
            .grant(ttl, None)
            .await
            .map_err(|e| self.etcd_err(e))?
            .id();
        let epoch = loop {
            let leader_as_read = match how {
                Election::Take => self.readable::<LeaderRecord>(&leader_key).await?,
                Election::WhenFree => Compare::version(leader_key.as_str(), CompareOp::Equal, 0),
            };
            let cur = self.get_number("epoch").await?;
            let record = LeaderRecord {
                epoch: cur + 1,
                holder: holder.to_string(),
            };
            let won = self
                .kv()
                .txn(
                    Txn::new()
                        .when(vec![value_is(&epoch_key, cur), leader_as_read])
                        .and_then(vec![
                            TxnOp::put(epoch_key.as_str(), (cur + 1).to_string(), None),
                            TxnOp::put(
                                leader_key.as_str(),
                                self.json(&record),
                                Some(PutOptions::new().with_lease(lease)),
                            ),
                        ]),
                )
                .await
                .map_err(|e| self.etcd_err(e))?
                .succeeded();
            if won {
                break Some(cur + 1);
            }
            if how == Election::WhenFree && self.get(&leader_key).await?.is_some() {
                break None;
            }
        };
        match epoch {
            Some(_) => self.keep(lease).await?,
            None => self.revoke(lease).await,
        }
        Ok(epoch)
    }

    /// Ends term `epoch`'s lease now: the `leader` record goes (only while
    /// the epoch is current), and the lease is revoked.
    pub(super) async fn resign_term(&self, epoch: Epoch) -> Result<(), StoreError> {
        let leader_key = self.key("leader");
        self.fenced(
            epoch,
            vec![],
            vec![TxnOp::delete(leader_key.as_str(), None)],
        )
        .await?;
        let held = self
            .lease
            .lock()
            .map_err(|_| StoreError::Unavailable("lease lock poisoned".into()))?
            .take();
        if let Some((lease, task)) = held {
            task.abort();
            self.revoke(lease).await;
        }
        Ok(())
    }

    /// Keeps `lease` alive from now on, in place of an earlier one.
    async fn keep(&self, lease: i64) -> Result<(), StoreError> {
        let task = tokio::spawn(keep_alive(self.client.clone(), lease, self.lease_ttl));
        let old = self
            .lease
            .lock()
            .map_err(|_| StoreError::Unavailable("lease lock poisoned".into()))?
            .replace((lease, task));
        if let Some((old_lease, old_task)) = old {
            old_task.abort();
            self.revoke(old_lease).await;
        }
        Ok(())
    }

    /// Best effort: an unrevoked lease just expires after its TTL.
    async fn revoke(&self, lease: i64) {
        let _ = self.client.lease_client().revoke(lease).await;
    }
}

/// Renews `lease` every third of its TTL for as long as the task runs.
async fn keep_alive(client: Client, lease: i64, ttl: Duration) {
    let mut lc = client.lease_client();
    let Ok((mut keeper, mut stream)) = lc.keep_alive(lease).await else {
        return;
    };
    loop {
        tokio::time::sleep(ttl / 3).await;
        if keeper.keep_alive().await.is_err() {
            // Reconnect and go on while the lease may still be alive.
            match lc.keep_alive(lease).await {
                Ok((k, s)) => (keeper, stream) = (k, s),
                Err(_) => continue,
            }
        }
        match stream.message().await {
            // TTL 0: the lease is gone; nothing left to keep alive.
            Ok(Some(r)) if r.ttl() <= 0 => return,
            _ => {}
        }
    }
}
