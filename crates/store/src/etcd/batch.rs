//! A controller's batch on etcd (`Store::write_batch`): fenced
//! transactions of a bounded number of writes, in order.

use super::{EtcdStore, value_is};
use drover_core::journal::Operation;
use drover_spi::{Epoch, Event, StoreError, Write};
use etcd_client::{DeleteOptions, TxnOp};
use std::collections::BTreeMap;

/// The most writes of a batch in one transaction: etcd refuses a
/// transaction of more than 128 operations (`--max-txn-ops`), and a write
/// takes at most two (a journal put and its compare; an event's put).
const BATCH_TXN_WRITES: usize = 40;

impl EtcdStore {
    /// Writes `writes` in transactions of at most [`BATCH_TXN_WRITES`].
    pub(super) async fn write_chunks(
        &self,
        epoch: Epoch,
        writes: &[Write],
    ) -> Result<(), StoreError> {
        for chunk in writes.chunks(BATCH_TXN_WRITES) {
            self.write_txn(epoch, chunk).await?;
        }
        Ok(())
    }

    /// Writes `writes` in one fenced transaction: the journal's last write
    /// per operation (etcd refuses a key twice in one transaction; the last
    /// is what applying them in order leaves), then the events numbered on
    /// from the log's sequence; again from fresh reads when a key changed
    /// meanwhile.
    async fn write_txn(&self, epoch: Epoch, writes: &[Write]) -> Result<(), StoreError> {
        let mut journal: BTreeMap<String, Option<&Operation>> = BTreeMap::new();
        let mut events = Vec::new();
        for write in writes {
            match write {
                Write::JournalPut(op) => {
                    journal.insert(self.journal_key(&op.id), Some(op));
                }
                Write::JournalRemove(id) => {
                    journal.insert(self.journal_key(id), None);
                }
                Write::Event(event) => events.push(event),
            }
        }
        loop {
            let (mut compares, mut ops) = (Vec::new(), Vec::new());
            for (key, op) in &journal {
                match op {
                    Some(op) => {
                        compares.push(self.readable::<Operation>(key).await?);
                        ops.push(TxnOp::put(key.as_str(), self.json(op), None));
                    }
                    None => ops.push(TxnOp::delete(key.as_str(), None)),
                }
            }
            if !events.is_empty() {
                let seq = self.get_number("events/seq").await?;
                compares.push(value_is(&self.key("events/seq"), seq));
                ops.extend(self.event_ops(seq, &events));
            }
            if self.fenced(epoch, compares, ops).await? {
                return Ok(());
            }
        }
    }

    /// The puts of `events` after sequence number `seq`, the sequence's new
    /// value, and the delete of what falls out of the bounded log: older
    /// events, and none of these put only to go (etcd refuses a delete
    /// over a key the same transaction puts).
    fn event_ops(&self, seq: u64, events: &[&Event]) -> Vec<TxnOp> {
        let last = seq + events.len() as u64;
        let keep_from = (last + 1).saturating_sub(self.limits.events.max(1) as u64);
        let mut ops = vec![TxnOp::put(self.key("events/seq"), last.to_string(), None)];
        for (next, event) in (seq + 1..).zip(events).filter(|(n, _)| *n >= keep_from) {
            ops.push(TxnOp::put(self.event_key(next), self.json(event), None));
        }
        let old_until = keep_from.min(seq + 1);
        if old_until > 1 {
            ops.push(TxnOp::delete(
                self.event_key(0),
                Some(DeleteOptions::new().with_range(self.event_key(old_until))),
            ));
        }
        ops
    }
}
