//! The `swarm` store: state kept in the swarm's own raft, as labels of the
//! swarm spec, reached through any manager's engine API.
//!
//! Each section of the state is one label, `drover.store.<ns>.<section>`,
//! whose value is `gz:` + base64(gzip(JSON)). Every write reads the swarm
//! object (spec + `Version.Index`), applies the contract's checks (revision
//! CAS, epoch fence) to what it read, and sends `POST /swarm/update?version=N`
//! with that same N: if anyone wrote in between (a commit, a campaign), the
//! swarm refuses with "update out of sequence" and the write is retried from
//! a fresh read, where the check then fails. Check and write are atomic.
//!
//! Size: one swarm update is one raft message; the raft refuses messages over
//! 1.5 MiB ("raft message is too large"), measured as 1 571 288 bytes of
//! label value on Docker 20.10. Every write replicates every label, so the
//! store keeps the encoded labels under [`SwarmOptions::budget`] (256 KiB by
//! default) and caps history and events (see [`SwarmOptions`]).

use crate::format::WriteFormat;
use crate::model::{Limits, Section, State, batch_sections, unavailable};
use async_trait::async_trait;
use base64::Engine as _;
use bollard::Docker;
use bollard::models::SwarmSpec;
use bollard::query_parameters::UpdateSwarmOptionsBuilder;
use drover_core::journal::Operation;
use drover_core::spec::ClusterSpec;
use drover_engine::{DockerEnv, EngineError, docker_client};
use drover_spi::{
    Controls, Epoch, Event, Heartbeat, Imported, Provenance, Reach, Revision, StatusJson, Store,
    StoreError, Write,
};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use std::collections::HashMap;
use std::io::{Read, Write as _};
use std::sync::Arc;
use std::time::Duration;

/// Largest label value the swarm accepted in one update, measured (bytes).
pub const MEASURED_RAFT_LIMIT: usize = 1_571_288;

/// Swarm store settings.
#[derive(Debug, Clone)]
pub struct SwarmOptions {
    /// Label namespace: `drover.store.<namespace>.*` (default `default`).
    pub namespace: String,
    /// History and event caps (default 20 revisions, 200 events).
    pub limits: Limits,
    /// Most bytes all of drover's labels may take together (default 256 KiB).
    pub budget: usize,
    /// Retries of a write that lost a version race (default 50).
    pub retries: u32,
    /// How to reach the engine, as the docker CLI would (default: this
    /// process's `DOCKER_HOST`, `DOCKER_TLS_VERIFY`, `DOCKER_CERT_PATH`).
    pub docker_env: Option<DockerEnv>,
}

impl Default for SwarmOptions {
    fn default() -> Self {
        SwarmOptions {
            namespace: "default".into(),
            limits: Limits {
                history: 20,
                events: 200,
            },
            budget: 256 * 1024,
            retries: 50,
            docker_env: None,
        }
    }
}

/// A store in the swarm's raft.
#[derive(Debug, Clone)]
pub struct SwarmStore {
    docker: Docker,
    opts: SwarmOptions,
    format: Arc<WriteFormat>,
}

fn engine(e: bollard::errors::Error) -> StoreError {
    // Through the engine's classification, so a page from something that
    // is no engine is summarised, not repeated.
    unavailable("docker engine", EngineError::from(e))
}

fn out_of_sequence(e: &bollard::errors::Error) -> bool {
    matches!(e, bollard::errors::Error::DockerResponseServerError { message, .. }
        if message.contains("update out of sequence"))
}

/// How often [`Store::changed`] looks at the swarm's labels.
const CHANGE_POLL: Duration = Duration::from_millis(500);

impl SwarmStore {
    /// Connects to a manager's engine like the docker CLI: `None` uses
    /// `DOCKER_HOST` or the default socket; `Some` an endpoint
    /// (`unix:///path/docker.sock`, `tcp://host:port`, `https://host:port`).
    /// `tcp://` speaks TLS when `DOCKER_TLS_VERIFY` is set, with the client
    /// certificates in `DOCKER_CERT_PATH`.
    pub async fn connect(endpoint: Option<&str>) -> Result<SwarmStore, StoreError> {
        SwarmStore::connect_with(endpoint, SwarmOptions::default()).await
    }

    /// Connects with explicit options.
    pub async fn connect_with(
        endpoint: Option<&str>,
        opts: SwarmOptions,
    ) -> Result<SwarmStore, StoreError> {
        let env = opts
            .docker_env
            .clone()
            .unwrap_or_else(DockerEnv::from_process);
        let host = env.host(endpoint);
        let timeout = Duration::from_secs(60);
        let docker = docker_client(endpoint, &env, timeout, timeout)
            .await
            .map_err(|e| match e {
                EngineError::BadAddress(m) => StoreError::BadAddress(m),
                EngineError::Unavailable(why) => StoreError::Unavailable(format!(
                    "cannot reach the docker engine at {host} ({why}): check that dockerd \
                     runs there and that --store (or DOCKER_HOST) names a swarm manager's engine"
                )),
                other => StoreError::Unavailable(format!(
                    "cannot use the docker engine at {host} as the swarm store: {other}"
                )),
            })?;
        // Only a manager can read or write the swarm object.
        docker.inspect_swarm().await.map_err(|e| {
            StoreError::Unavailable(format!(
                "the engine at {host} is not a reachable swarm manager: {}",
                EngineError::from(e)
            ))
        })?;
        Ok(SwarmStore {
            docker,
            opts,
            format: Arc::default(),
        })
    }

    /// The raw engine client (for tools and tests).
    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    /// The label that holds `section`.
    pub fn label(&self, section: &str) -> String {
        format!("drover.store.{}.{}", self.opts.namespace, section)
    }

    /// Everything this store keeps, as it is kept: each of its labels, its
    /// value decompressed (the bytes a secret scan must see; the compressed
    /// label would hide them).
    pub async fn raw_dump(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let (_, spec) = self.fetch().await?;
        let prefix = self.label("");
        let mut out = Vec::new();
        for (k, v) in spec.labels.unwrap_or_default() {
            if k.starts_with(&prefix) {
                out.push((k, unpack(&v)?));
            }
        }
        out.sort();
        Ok(out)
    }

    fn decode_labels(
        &self,
        labels: &HashMap<String, String>,
        sections: &[Section],
    ) -> Result<State, StoreError> {
        let mut state = State::default();
        for &s in sections {
            if let Some(v) = labels.get(&self.label(s.name())) {
                state.decode(s, &unpack(v)?)?;
            }
        }
        Ok(state)
    }

    async fn fetch(&self) -> Result<(i64, SwarmSpec), StoreError> {
        let swarm = self.docker.inspect_swarm().await.map_err(engine)?;
        let version = swarm
            .version
            .and_then(|v| v.index)
            .ok_or_else(|| StoreError::Corrupt("swarm inspect returned no version".to_string()))?;
        let spec = swarm
            .spec
            .ok_or_else(|| StoreError::Corrupt("swarm inspect returned no spec".to_string()))?;
        Ok((version as i64, spec))
    }

    async fn read(&self, sections: &[Section]) -> Result<State, StoreError> {
        let (_, spec) = self.fetch().await?;
        self.decode_labels(&spec.labels.unwrap_or_default(), sections)
    }

    /// Read, check and apply `f`, write at the version read; on "update out
    /// of sequence" start again from a fresh read.
    async fn write<T>(
        &self,
        sections: &[Section],
        mut f: impl FnMut(&mut State) -> Result<T, StoreError> + Send,
    ) -> Result<T, StoreError> {
        let mut attempt = 0;
        loop {
            let (version, mut spec) = self.fetch().await?;
            let mut labels = spec.labels.take().unwrap_or_default();
            let mut state = self.decode_labels(&labels, sections)?;
            let out = f(&mut state)?;
            for &s in sections {
                labels.insert(
                    self.label(s.name()),
                    pack(&state.encode(s, self.format.get())),
                );
            }
            let prefix = self.label("");
            let size: usize = labels
                .iter()
                .filter(|(k, _)| k.starts_with(&prefix))
                .map(|(k, v)| k.len() + v.len())
                .sum();
            if size > self.opts.budget {
                return Err(StoreError::TooLarge(format!(
                    "the swarm store's labels would take {size} bytes compressed, over its \
                     budget of {} (the swarm's raft refuses about {MEASURED_RAFT_LIMIT}); \
                     use an etcd or file store for specs this large",
                    self.opts.budget
                )));
            }
            spec.labels = Some(labels);
            let options = UpdateSwarmOptionsBuilder::default()
                .version(version)
                .build();
            match self.docker.update_swarm(spec, options).await {
                Ok(()) => return Ok(out),
                Err(e) if out_of_sequence(&e) && attempt < self.opts.retries => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(5 * u64::from(attempt.min(20)))).await;
                }
                Err(e) if out_of_sequence(&e) => {
                    return Err(StoreError::Unavailable(format!(
                        "swarm update kept losing the version race after {attempt} retries: {e}"
                    )));
                }
                Err(bollard::errors::Error::DockerResponseServerError { message, .. })
                    if message.contains("too large") =>
                {
                    return Err(StoreError::TooLarge(format!(
                        "the swarm's raft refused the update ({size} bytes of drover labels): \
                         {message}"
                    )));
                }
                Err(e) => return Err(engine(e)),
            }
        }
    }

    /// True when this store's engine is the swarm's raft leader.
    async fn engine_is_leader(&self) -> Result<bool, StoreError> {
        let info = self.docker.info().await.map_err(engine)?;
        let Some(swarm) = info.swarm else {
            return Ok(false);
        };
        if swarm.control_available != Some(true) {
            return Ok(false);
        }
        let Some(node_id) = swarm.node_id.filter(|n| !n.is_empty()) else {
            return Ok(false);
        };
        let node = self.docker.inspect_node(&node_id).await.map_err(engine)?;
        Ok(node.manager_status.and_then(|m| m.leader) == Some(true))
    }
}

/// `gz:` + base64(gzip(bytes)).
fn pack(bytes: &[u8]) -> String {
    let mut enc = GzEncoder::new(Vec::new(), Compression::best());
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(bytes);
    let gz = enc.finish().unwrap_or_default();
    format!(
        "gz:{}",
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(gz)
    )
}

fn unpack(label: &str) -> Result<Vec<u8>, StoreError> {
    let bad = |e: &dyn std::fmt::Display| StoreError::Corrupt(format!("swarm label: {e}"));
    let b64 = label
        .strip_prefix("gz:")
        .ok_or_else(|| bad(&"value does not start with gz:"))?;
    let gz = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(b64)
        .map_err(|e| bad(&e))?;
    let mut out = Vec::new();
    GzDecoder::new(gz.as_slice())
        .read_to_end(&mut out)
        .map_err(|e| bad(&e))?;
    Ok(out)
}

use Section::{Controllers, Controls as SControls, Events, Journal, Meta, Revisions, Status};

#[async_trait]
impl Store for SwarmStore {
    async fn cluster_id(&self) -> Result<Option<String>, StoreError> {
        Ok(self.read(&[Meta]).await?.meta.cluster_id)
    }

    async fn init_cluster(&self, id: &str) -> Result<(), StoreError> {
        self.write(&[Meta], |s| s.init_cluster(id)).await
    }

    async fn import(&self, cluster: &Imported) -> Result<(), StoreError> {
        let limits = self.opts.limits;
        self.write(&[Meta, Revisions, SControls], |s| s.import(cluster, limits))
            .await
    }

    async fn desired(&self) -> Result<Option<Revision>, StoreError> {
        Ok(self.read(&[Meta, Revisions]).await?.desired())
    }

    async fn history(&self) -> Result<Vec<Revision>, StoreError> {
        Ok(self.read(&[Revisions]).await?.revisions)
    }

    async fn commit(
        &self,
        expected: u64,
        spec: &ClusterSpec,
        provenance: Provenance,
        is_rollback: bool,
    ) -> Result<u64, StoreError> {
        let limits = self.opts.limits;
        self.write(&[Meta, Revisions], |s| {
            s.commit(expected, spec, provenance.clone(), is_rollback, limits)
        })
        .await
    }

    async fn commit_rollback(
        &self,
        epoch: Epoch,
        expected: u64,
        spec: &ClusterSpec,
        provenance: Provenance,
    ) -> Result<u64, StoreError> {
        let limits = self.opts.limits;
        self.write(&[Meta, Revisions], |s| {
            s.commit_rollback(epoch, expected, spec, provenance.clone(), limits)
        })
        .await
    }

    async fn mark_converged(&self, epoch: Epoch, rev: u64) -> Result<(), StoreError> {
        self.write(&[Meta, Revisions], |s| s.mark_converged(epoch, rev))
            .await
    }

    async fn changed(&self) -> Result<(), StoreError> {
        // The engine emits no event for a swarm update: compare the two
        // labels a controller acts on, read from its own engine, twice a
        // second (status and heartbeats, written every pass, are not looked at).
        let acted_on = || async {
            let (_, spec) = self.fetch().await?;
            let labels = spec.labels.unwrap_or_default();
            Ok::<_, StoreError>(
                [Revisions, SControls].map(|s| labels.get(&self.label(s.name())).cloned()),
            )
        };
        let before = acted_on().await?;
        loop {
            tokio::time::sleep(CHANGE_POLL).await;
            if acted_on().await? != before {
                return Ok(());
            }
        }
    }
    async fn controls(&self) -> Result<Controls, StoreError> {
        Ok(self.read(&[SControls]).await?.controls)
    }

    async fn set_controls(&self, controls: &Controls) -> Result<(), StoreError> {
        self.write(&[SControls], |s| {
            s.controls = controls.clone();
            Ok(())
        })
        .await
    }

    /// Only the controller whose engine is the swarm leader may campaign;
    /// others get [`StoreError::Unavailable`]. The check is advisory (the
    /// leader may change right after): safety comes from the epoch fence.
    async fn campaign(&self, holder: &str) -> Result<Epoch, StoreError> {
        if !self.engine_is_leader().await? {
            return Err(StoreError::Unavailable(
                "this controller's engine is not the swarm leader; only the leader's \
                 controller may campaign"
                    .to_string(),
            ));
        }
        self.write(&[Meta], |s| Ok(s.campaign(holder))).await
    }

    async fn leader(&self) -> Result<Option<(Epoch, String)>, StoreError> {
        Ok(self.read(&[Meta]).await?.leader())
    }

    async fn resign(&self, epoch: Epoch) -> Result<(), StoreError> {
        self.write(&[Meta], |s| s.resign(epoch)).await
    }

    fn reach(&self) -> Reach {
        Reach::InRaft
    }

    async fn check_epoch(&self, epoch: Epoch) -> Result<(), StoreError> {
        // The swarm object as the raft leader holds it (swarmkit's control
        // API forwards a follower's calls to the leader): what every
        // fenced write of this store is checked against.
        self.read(&[Meta]).await?.fence(epoch)
    }

    async fn journal(&self) -> Result<Vec<Operation>, StoreError> {
        Ok(self.read(&[Journal]).await?.journal.into_values().collect())
    }

    async fn journal_put(&self, epoch: Epoch, op: &Operation) -> Result<(), StoreError> {
        self.write(&[Meta, Journal], |s| s.journal_put(epoch, op))
            .await
    }

    async fn journal_remove(&self, epoch: Epoch, op: &str) -> Result<(), StoreError> {
        self.write(&[Meta, Journal], |s| s.journal_remove(epoch, op))
            .await
    }

    /// One swarm update (one raft round) for the whole batch.
    async fn write_batch(&self, epoch: Epoch, writes: &[Write]) -> Result<(), StoreError> {
        let limits = self.opts.limits;
        self.write(batch_sections(writes), |s| {
            s.write_batch(epoch, writes, limits)
        })
        .await
    }

    async fn publish_status(&self, epoch: Epoch, status: StatusJson) -> Result<(), StoreError> {
        // Cloned per attempt: a lost version race writes again.
        self.write(&[Meta, Status], |s| s.publish_status(epoch, status.clone()))
            .await
    }

    async fn status(&self) -> Result<Option<serde_json::Value>, StoreError> {
        self.read(&[Status]).await?.status()
    }

    async fn append_event(&self, epoch: Epoch, event: &Event) -> Result<(), StoreError> {
        let limits = self.opts.limits;
        self.write(&[Meta, Events], |s| s.append_event(epoch, event, limits))
            .await
    }

    async fn events(&self, since_ms: u64) -> Result<Vec<Event>, StoreError> {
        Ok(self.read(&[Events]).await?.events_since(since_ms))
    }

    async fn heartbeat(&self, beat: &Heartbeat) -> Result<(), StoreError> {
        self.write(&[Controllers], |s| {
            s.heartbeat(beat);
            Ok(())
        })
        .await
    }

    fn outside_raft(&self) -> bool {
        false
    }

    async fn heartbeats(&self) -> Result<Vec<Heartbeat>, StoreError> {
        Ok(self
            .read(&[Controllers])
            .await?
            .heartbeats
            .into_values()
            .collect())
    }

    fn write_format(&self) -> u32 {
        self.format.get()
    }

    fn set_write_format(&self, format: u32) {
        self.format.set(format);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trips_and_compresses() {
        let json = serde_json::to_vec(&vec!["the same words again"; 500]).unwrap();
        let packed = pack(&json);
        assert!(
            packed.len() * 10 < json.len(),
            "{} vs {}",
            packed.len(),
            json.len()
        );
        assert_eq!(unpack(&packed).unwrap(), json);
        assert!(matches!(unpack("plain"), Err(StoreError::Corrupt(_))));
    }
}
