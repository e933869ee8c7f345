//! The swarm store as a command reads it: through whichever manager
//! answers, not only the one engine it was given.
//!
//! A command given one manager's engine (`--store swarm:ENDPOINT`) outlives
//! that manager whenever the swarm it follows rolls its managers: a manager
//! roll demotes and replaces every one of them, and a teardown retires them.
//! [`FollowingStore`] keeps the command going: when its engine answers
//! [`StoreError::Unavailable`] (not a manager any more, gone, out of the
//! swarm) it finds another manager of the same cluster — the engine it was
//! given first, then the managers' addresses the swarm listed while it
//! worked, then the provider's machines — and asks once more, bounded,
//! naming every engine it tried when none answers.
//!
//! Only what is safe to ask twice is asked again: reads, and the
//! operator's own writes. A commit is a compare-and-swap on the revision,
//! so a commit whose answer was lost may have landed: it is re-read first
//! (the same revision with the same provenance is that commit, reported as
//! done), never sent blindly a second time. A campaign, which only the
//! raft leader's engine accepts, is taken to the leader. Fenced controller
//! writes are not retried here: they go to the engine in use as they are.

use crate::swarm::{SwarmOptions, SwarmStore};
use async_trait::async_trait;
use drover_core::journal::Operation;
use drover_core::spec::ClusterSpec;
use drover_engine::PeerEndpoints;
use drover_spi::{
    Controls, Epoch, Event, Heartbeat, Imported, Provenance, Reach, Revision, StatusJson, Store,
    StoreError, Write,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one candidate engine may take to answer as a manager.
const ASK_ONE: Duration = Duration::from_secs(3);

/// The swarm store through any manager of the swarm (module docs).
pub struct FollowingStore {
    /// The engine given (`None`: the docker CLI's, `DOCKER_HOST`).
    given: Option<String>,
    /// The provider's machines, when the command has them.
    machines: Option<Arc<dyn PeerEndpoints>>,
    /// The engine in use and its store.
    current: Mutex<(Option<String>, Arc<SwarmStore>)>,
    /// Engines of the swarm's managers, as the swarm listed them.
    learned: Mutex<Vec<String>>,
    /// The cluster id read first: a store found again must hold it.
    cluster: Option<String>,
    /// How each engine is used as the store.
    opts: SwarmOptions,
}

/// Where an endpoint points, for messages.
fn shown(endpoint: Option<&str>) -> String {
    endpoint.map_or_else(|| "DOCKER_HOST".into(), str::to_string)
}

/// Connects to `endpoint` as a swarm store, bounded by [`ASK_ONE`].
async fn connect(endpoint: Option<&str>, opts: &SwarmOptions) -> Result<SwarmStore, StoreError> {
    let connecting = SwarmStore::connect_with(endpoint, opts.clone());
    match tokio::time::timeout(ASK_ONE, connecting).await {
        Ok(r) => r,
        Err(_) => Err(StoreError::Unavailable(format!(
            "{} did not answer within {}s",
            shown(endpoint),
            ASK_ONE.as_secs()
        ))),
    }
}

impl FollowingStore {
    /// Opens the swarm store through `given` or, when that engine is no
    /// manager, through another of `machines`' engines.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] naming every engine tried when none
    /// answers as a manager; a bad address as [`SwarmStore::connect`].
    pub async fn open(
        given: Option<&str>,
        machines: Option<Arc<dyn PeerEndpoints>>,
    ) -> Result<FollowingStore, StoreError> {
        FollowingStore::open_with(given, machines, SwarmOptions::default()).await
    }

    /// [`FollowingStore::open`] with each engine used as `opts` say.
    ///
    /// # Errors
    /// As [`FollowingStore::open`].
    pub async fn open_with(
        given: Option<&str>,
        machines: Option<Arc<dyn PeerEndpoints>>,
        opts: SwarmOptions,
    ) -> Result<FollowingStore, StoreError> {
        let (endpoint, store) = match SwarmStore::connect_with(given, opts.clone()).await {
            Ok(store) => (given.map(str::to_string), store),
            Err(StoreError::Unavailable(why)) => {
                let probe = FollowingStore::candidates_of(given, &[], machines.as_deref());
                // The given engine was just asked.
                find(&probe[1..], None, &why, &opts).await?
            }
            Err(e) => return Err(e),
        };
        let cluster = store.cluster_id().await?;
        let learned = learn(&store, endpoint.as_deref()).await;
        Ok(FollowingStore {
            given: given.map(str::to_string),
            machines,
            current: Mutex::new((endpoint, Arc::new(store))),
            learned: Mutex::new(learned),
            cluster,
            opts,
        })
    }

    /// The engine in use (`None`: `DOCKER_HOST`).
    pub fn endpoint(&self) -> Option<String> {
        self.lock().0.clone()
    }

    /// Every engine this store knows of, the one given first.
    pub fn engines(&self) -> Vec<String> {
        let learned = self.learned.lock().map(|l| l.clone()).unwrap_or_default();
        FollowingStore::candidates_of(self.given.as_deref(), &learned, self.machines.as_deref())
            .into_iter()
            .flatten()
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Option<String>, Arc<SwarmStore>)> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn store(&self) -> Arc<SwarmStore> {
        self.lock().1.clone()
    }

    /// The given engine, the learned managers, the machines: each once.
    fn candidates_of(
        given: Option<&str>,
        learned: &[String],
        machines: Option<&dyn PeerEndpoints>,
    ) -> Vec<Option<String>> {
        let mut out = vec![given.map(str::to_string)];
        let more = learned
            .iter()
            .cloned()
            .chain(machines.map(|m| m.peer_endpoints()).unwrap_or_default());
        for e in more.map(Some) {
            if !out.contains(&e) {
                out.push(e);
            }
        }
        out
    }

    /// After `why` from the engine in use: another manager of this
    /// cluster, now in use.
    async fn found_again(&self, why: &str) -> Result<Arc<SwarmStore>, StoreError> {
        let learned = self.learned.lock().map(|l| l.clone()).unwrap_or_default();
        let probe = FollowingStore::candidates_of(
            self.given.as_deref(),
            &learned,
            self.machines.as_deref(),
        );
        let (endpoint, store) = find(&probe, self.cluster.as_deref(), why, &self.opts).await?;
        tracing::info!(
            "the swarm store's engine no longer answers ({why}): reading it through {}",
            shown(endpoint.as_deref())
        );
        let more = learn(&store, endpoint.as_deref()).await;
        if !more.is_empty()
            && let Ok(mut l) = self.learned.lock()
        {
            *l = more;
        }
        store.set_write_format(self.store().write_format());
        let store = Arc::new(store);
        *self.lock() = (endpoint, store.clone());
        Ok(store)
    }

    /// A commit whose answer was lost, looked for: the revision after
    /// `expected` made with this very provenance and spec.
    async fn landed(
        store: &dyn Store,
        expected: u64,
        spec: &ClusterSpec,
        provenance: &Provenance,
    ) -> Result<Option<u64>, StoreError> {
        let history = store.history().await?;
        Ok(history
            .iter()
            .find(|r| r.rev == expected + 1 && r.provenance == *provenance && r.spec == *spec)
            .map(|r| r.rev))
    }
}

/// The first of `candidates` that answers as a manager of `cluster` (any,
/// when `None`); else `Unavailable` saying `why` and what was tried (just
/// `why` when there was nothing else to try).
async fn find(
    candidates: &[Option<String>],
    cluster: Option<&str>,
    why: &str,
    opts: &SwarmOptions,
) -> Result<(Option<String>, SwarmStore), StoreError> {
    let mut tried = Vec::new();
    for c in candidates {
        match connect(c.as_deref(), opts).await {
            Ok(store) => match (cluster, store.cluster_id().await) {
                (None, _) => return Ok((c.clone(), store)),
                (Some(id), Ok(Some(found))) if found == id => return Ok((c.clone(), store)),
                (_, Ok(found)) => tried.push(format!(
                    "{} (another cluster: {})",
                    shown(c.as_deref()),
                    found.unwrap_or_else(|| "none".into())
                )),
                (_, Err(e)) => tried.push(format!("{} ({e})", shown(c.as_deref()))),
            },
            Err(e) => tried.push(format!("{} ({e})", shown(c.as_deref()))),
        }
    }
    Err(StoreError::Unavailable(match tried.is_empty() {
        true => why.to_string(),
        false => format!(
            "{why}; no other manager of the swarm answers (tried {})",
            tried.join("; ")
        ),
    }))
}

/// The engines of the swarm's managers `store` lists, where they can be
/// named: on `tcp://`/`https://`, the same scheme and port at each
/// manager's advertised address (a unix socket names no other engine).
async fn learn(store: &SwarmStore, endpoint: Option<&str>) -> Vec<String> {
    if engines_at(endpoint, &[]).is_none() {
        return Vec::new();
    }
    let Ok(Ok(nodes)) = tokio::time::timeout(ASK_ONE, store.docker().list_nodes(None)).await else {
        return Vec::new();
    };
    let addrs: Vec<String> = nodes
        .into_iter()
        .filter_map(|n| n.manager_status?.addr)
        .collect();
    engines_at(endpoint, &addrs).unwrap_or_default()
}

/// The engines at the managers' advertised addresses `addrs` (`HOST:2377`)
/// reached as `endpoint` is (same scheme and port); `None` when
/// `endpoint` names no other engine (a unix socket, `DOCKER_HOST`).
fn engines_at(endpoint: Option<&str>, addrs: &[String]) -> Option<Vec<String>> {
    let (scheme, rest) = endpoint?.split_once("://")?;
    if scheme == "unix" {
        return None;
    }
    let rest = rest.trim_end_matches('/');
    let port = rest.rsplit_once(':').map(|(_, p)| p);
    Some(
        addrs
            .iter()
            .filter_map(|addr| {
                let host = addr.rsplit_once(':').map_or(addr.as_str(), |(h, _)| h);
                (!host.is_empty()).then(|| match port {
                    Some(p) => format!("{scheme}://{host}:{p}"),
                    None => format!("{scheme}://{host}"),
                })
            })
            .collect(),
    )
}

/// Asks `$s` (the store in use) `$call`; on `Unavailable`, once more
/// through another manager.
macro_rules! again {
    ($self:ident, $s:ident => $call:expr) => {{
        let $s = $self.store();
        match $call.await {
            Err(StoreError::Unavailable(why)) => {
                let $s = $self.found_again(&why).await?;
                $call.await
            }
            other => other,
        }
    }};
}

#[async_trait]
impl Store for FollowingStore {
    async fn cluster_id(&self) -> Result<Option<String>, StoreError> {
        again!(self, s => s.cluster_id())
    }
    async fn init_cluster(&self, id: &str) -> Result<(), StoreError> {
        // Recording the same id again is no change.
        again!(self, s => s.init_cluster(id))
    }
    async fn import(&self, cluster: &Imported) -> Result<(), StoreError> {
        self.store().import(cluster).await
    }
    async fn desired(&self) -> Result<Option<Revision>, StoreError> {
        again!(self, s => s.desired())
    }
    async fn history(&self) -> Result<Vec<Revision>, StoreError> {
        again!(self, s => s.history())
    }
    async fn commit(
        &self,
        expected: u64,
        spec: &ClusterSpec,
        provenance: Provenance,
        is_rollback: bool,
    ) -> Result<u64, StoreError> {
        let first = self.store();
        match first
            .commit(expected, spec, provenance.clone(), is_rollback)
            .await
        {
            Err(StoreError::Unavailable(why)) => {
                let s = self.found_again(&why).await?;
                // The lost answer may hide a commit that landed: a second
                // one would hear `Conflict` against its own revision.
                if let Some(rev) = Self::landed(s.as_ref(), expected, spec, &provenance).await? {
                    return Ok(rev);
                }
                s.commit(expected, spec, provenance, is_rollback).await
            }
            other => other,
        }
    }
    async fn commit_rollback(
        &self,
        epoch: Epoch,
        expected: u64,
        spec: &ClusterSpec,
        provenance: Provenance,
    ) -> Result<u64, StoreError> {
        let s = self.store();
        s.commit_rollback(epoch, expected, spec, provenance).await
    }
    async fn mark_converged(&self, epoch: Epoch, rev: u64) -> Result<(), StoreError> {
        self.store().mark_converged(epoch, rev).await
    }
    async fn changed(&self) -> Result<(), StoreError> {
        again!(self, s => s.changed())
    }
    async fn controls(&self) -> Result<Controls, StoreError> {
        again!(self, s => s.controls())
    }
    async fn set_controls(&self, controls: &Controls) -> Result<(), StoreError> {
        // The whole controls are written: writing them twice is once.
        again!(self, s => s.set_controls(controls))
    }
    async fn campaign(&self, holder: &str) -> Result<Epoch, StoreError> {
        // Only the raft leader's engine takes a campaign: go to it.
        match self.store().campaign(holder).await {
            Err(StoreError::Unavailable(why)) => self.at_the_leader(holder, &why).await,
            other => other,
        }
    }
    async fn leader(&self) -> Result<Option<(Epoch, String)>, StoreError> {
        again!(self, s => s.leader())
    }
    async fn resign(&self, epoch: Epoch) -> Result<(), StoreError> {
        self.store().resign(epoch).await
    }
    fn reach(&self) -> Reach {
        Reach::InRaft
    }
    async fn check_epoch(&self, epoch: Epoch) -> Result<(), StoreError> {
        again!(self, s => s.check_epoch(epoch))
    }
    async fn journal(&self) -> Result<Vec<Operation>, StoreError> {
        again!(self, s => s.journal())
    }
    async fn journal_put(&self, epoch: Epoch, op: &Operation) -> Result<(), StoreError> {
        self.store().journal_put(epoch, op).await
    }
    async fn journal_remove(&self, epoch: Epoch, op: &str) -> Result<(), StoreError> {
        self.store().journal_remove(epoch, op).await
    }
    async fn write_batch(&self, epoch: Epoch, writes: &[Write]) -> Result<(), StoreError> {
        self.store().write_batch(epoch, writes).await
    }
    async fn publish_status(&self, epoch: Epoch, status: StatusJson) -> Result<(), StoreError> {
        self.store().publish_status(epoch, status).await
    }
    async fn status(&self) -> Result<Option<serde_json::Value>, StoreError> {
        again!(self, s => s.status())
    }
    async fn append_event(&self, epoch: Epoch, event: &Event) -> Result<(), StoreError> {
        self.store().append_event(epoch, event).await
    }
    async fn events(&self, since_ms: u64) -> Result<Vec<Event>, StoreError> {
        again!(self, s => s.events(since_ms))
    }
    async fn heartbeat(&self, beat: &Heartbeat) -> Result<(), StoreError> {
        self.store().heartbeat(beat).await
    }
    fn outside_raft(&self) -> bool {
        false
    }
    async fn heartbeats(&self) -> Result<Vec<Heartbeat>, StoreError> {
        again!(self, s => s.heartbeats())
    }
    fn write_format(&self) -> u32 {
        self.store().write_format()
    }
    fn set_write_format(&self, format: u32) {
        self.store().set_write_format(format);
    }
}

impl FollowingStore {
    /// A campaign the engine in use refused (`why`: not the leader's):
    /// taken to each other manager of this cluster until the leader's
    /// engine takes it, which is then the one in use.
    async fn at_the_leader(&self, holder: &str, why: &str) -> Result<Epoch, StoreError> {
        let mut tried = Vec::new();
        for c in self.engines_to_try() {
            if c == self.endpoint() {
                continue;
            }
            let Ok(store) = connect(c.as_deref(), &self.opts).await else {
                continue;
            };
            if store.cluster_id().await.ok().flatten() != self.cluster {
                continue;
            }
            match store.campaign(holder).await {
                Ok(epoch) => {
                    store.set_write_format(self.store().write_format());
                    *self.lock() = (c, Arc::new(store));
                    return Ok(epoch);
                }
                Err(e) => tried.push(format!("{} ({e})", shown(c.as_deref()))),
            }
        }
        Err(StoreError::Unavailable(format!(
            "{why}; no manager's engine took the campaign as the leader's (tried {})",
            tried.join("; ")
        )))
    }

    fn engines_to_try(&self) -> Vec<Option<String>> {
        let learned = self.learned.lock().map(|l| l.clone()).unwrap_or_default();
        FollowingStore::candidates_of(self.given.as_deref(), &learned, self.machines.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_commit_whose_answer_was_lost_is_found_by_its_provenance_and_spec() {
        let store = crate::MemStore::default();
        let spec = |size| {
            drover_core::spec::parse_str(&format!(
                "groups:\n- name: w\n  role: worker\n  allocation: {{size: {size}}}\n  instance: {{provider: sim}}\n"
            ))
            .spec
            .unwrap()
        };
        let mine = Provenance {
            who: "op@host".into(),
            at_ms: 7,
            message: "apply".into(),
        };
        store
            .commit(0, &spec(1), mine.clone(), false)
            .await
            .unwrap();
        let landed = FollowingStore::landed(&store, 0, &spec(1), &mine).await;
        assert_eq!(landed.unwrap(), Some(1), "mine landed");
        // Another's commit from the same base, or another spec, is not mine:
        // the retry is sent, and the CAS answers Conflict.
        let theirs = Provenance {
            who: "other@host".into(),
            ..mine.clone()
        };
        let landed = FollowingStore::landed(&store, 0, &spec(1), &theirs).await;
        assert_eq!(landed.unwrap(), None);
        let landed = FollowingStore::landed(&store, 0, &spec(2), &mine).await;
        assert_eq!(landed.unwrap(), None);
        let landed = FollowingStore::landed(&store, 1, &spec(1), &mine).await;
        assert_eq!(landed.unwrap(), None, "not yet committed on top of 1");
    }

    #[test]
    fn managers_are_reached_as_the_engine_given_is() {
        let addrs = vec!["10.0.0.5:2377".to_string(), "10.0.0.6:2377".to_string()];
        assert_eq!(
            engines_at(Some("tcp://10.0.0.4:2376"), &addrs),
            Some(vec![
                "tcp://10.0.0.5:2376".to_string(),
                "tcp://10.0.0.6:2376".to_string()
            ])
        );
        assert_eq!(
            engines_at(Some("https://m1.example:2376/"), &addrs[..1]),
            Some(vec!["https://10.0.0.5:2376".to_string()])
        );
        // A unix socket, or DOCKER_HOST, names no other engine.
        assert_eq!(engines_at(Some("unix:///run/docker.sock"), &addrs), None);
        assert_eq!(engines_at(None, &addrs), None);
    }

    #[test]
    fn the_engine_given_is_tried_first_then_the_swarms_then_the_machines() {
        let learned = vec!["tcp://b:2376".to_string(), "tcp://a:2376".to_string()];
        let machines = vec!["tcp://a:2376".to_string(), "unix:///m/sock".to_string()];
        let order = FollowingStore::candidates_of(Some("tcp://a:2376"), &learned, Some(&machines));
        assert_eq!(
            order,
            vec![
                Some("tcp://a:2376".to_string()),
                Some("tcp://b:2376".to_string()),
                Some("unix:///m/sock".to_string())
            ]
        );
        // DOCKER_HOST first when no engine is named.
        assert_eq!(FollowingStore::candidates_of(None, &[], None), vec![None]);
    }
}
