//! Terms in etcd: the `epoch` key, never leased, and the `leader` record
//! under an etcd lease kept alive by the holder's process. A campaign takes
//! the term whoever holds it (a manager's controller whose engine leads);
//! an acquisition only while no lease lives (external controllers taking
//! turns); a resignation ends the lease at once.

use super::{EtcdStore, LeaderRecord, value_is};
use drover_spi::{Epoch, StoreError};
use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};
use std::time::Duration;
use tokio::task::JoinHandle;

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
            Some(epoch) => self.keep(lease, epoch).await?,
            None => self.revoke(lease).await,
        }
        Ok(epoch)
    }

    /// Ends term `epoch`'s lease now, if this handle holds it: its
    /// keep-alive stops first, whatever etcd answers next, so the lease
    /// lapses within its TTL at the latest; revoking it deletes the
    /// `leader` record it carries (never a newer term's: that one lives
    /// under its own lease).
    pub(super) async fn resign_term(&self, epoch: Epoch) -> Result<(), StoreError> {
        let held = {
            let mut guard = self
                .lease
                .lock()
                .map_err(|_| StoreError::Unavailable("lease lock poisoned".into()))?;
            match guard.as_ref() {
                Some(h) if h.epoch == epoch => guard.take(),
                _ => None,
            }
        };
        let Some(held) = held else {
            return Ok(());
        };
        held.keeper.abort();
        self.client
            .lease_client()
            .revoke(held.lease)
            .await
            .map(|_| ())
            .map_err(|e| self.etcd_err(e))
    }

    /// Keeps `lease`, term `epoch`'s, alive from now on, in place of an
    /// earlier one.
    async fn keep(&self, lease: i64, epoch: Epoch) -> Result<(), StoreError> {
        let keeper = tokio::spawn(keep_alive(self.client.clone(), lease, self.lease_ttl));
        let held = Held {
            lease,
            epoch,
            keeper,
        };
        let old = self
            .lease
            .lock()
            .map_err(|_| StoreError::Unavailable("lease lock poisoned".into()))?
            .replace(held);
        if let Some(old) = old {
            old.keeper.abort();
            self.revoke(old.lease).await;
        }
        Ok(())
    }

    /// Best effort: an unrevoked lease just expires after its TTL.
    async fn revoke(&self, lease: i64) {
        let _ = self.client.lease_client().revoke(lease).await;
    }
}

/// The lease of a term this handle won, and the task keeping it alive.
pub(super) struct Held {
    lease: i64,
    epoch: Epoch,
    pub(super) keeper: JoinHandle<()>,
}

/// Renews `lease` every third of its TTL for as long as the task runs,
/// (re)opening the keep-alive stream whenever it is not open (the first
/// attempt may fail as any later one may): the lease lapses only if no
/// renewal reaches etcd for a whole TTL.
async fn keep_alive(client: Client, lease: i64, ttl: Duration) {
    let mut lc = client.lease_client();
    let mut open = None;
    loop {
        if open.is_none() {
            open = lc.keep_alive(lease).await.ok();
        }
        if let Some((keeper, stream)) = open.as_mut() {
            let renewed = match keeper.keep_alive().await {
                Ok(()) => stream.message().await.ok().flatten(),
                Err(_) => None,
            };
            match renewed {
                // TTL 0: the lease is gone; nothing left to keep alive.
                Some(r) if r.ttl() <= 0 => return,
                Some(_) => {}
                None => open = None,
            }
        }
        tokio::time::sleep(ttl / 3).await;
    }
}
