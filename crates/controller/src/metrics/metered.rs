//! The provider and engine seams wrapped so that every call they make is
//! counted and timed in the controller's [`Metrics`]: the wrapping is apart
//! from the registry so a reader of either meets one idea.

use super::Metrics;
use async_trait::async_trait;
use drover_core::model::{Instance, Services, SwarmView};
use drover_core::spec::Role;
use drover_spi::{
    Cluster, ClusterError, Fence, InstanceProvider, JoinMaterial, ProviderError, ProvisionRequest,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A provider whose calls are counted and timed.
pub(crate) struct MeteredProvider {
    pub(crate) inner: Arc<dyn InstanceProvider>,
    pub(crate) metrics: Metrics,
}

const PROVIDER: &str = "provider";
const ENGINE: &str = "engine";

#[async_trait]
impl InstanceProvider for MeteredProvider {
    async fn ready(&self, call: drover_spi::ProviderCall) {
        self.inner.ready(call).await
    }

    fn exposes_boot_env(&self) -> bool {
        self.inner.exposes_boot_env()
    }

    fn listing_is_complete(&self) -> bool {
        self.inner.listing_is_complete()
    }

    fn updates_in_place(&self) -> bool {
        self.inner.updates_in_place()
    }

    async fn run_update(
        &self,
        instance: &str,
        run: &drover_core::in_place::UpdateRun,
        fence: &dyn Fence,
    ) -> Result<drover_core::in_place::UpdateOutcome, ProviderError> {
        let f = self.inner.run_update(instance, run, fence);
        self.metrics
            .timed(PROVIDER, "run_update", f, Result::is_err)
            .await
    }

    async fn boot_log(
        &self,
        instance: &str,
    ) -> Result<Option<drover_core::boot::BootLog>, ProviderError> {
        self.inner.boot_log(instance).await
    }

    async fn join_failed(&self, instance: &str) -> Option<drover_core::boot::JoinFailed> {
        self.inner.join_failed(instance).await
    }

    async fn provision(
        &self,
        req: ProvisionRequest,
        fence: &dyn Fence,
    ) -> Result<String, ProviderError> {
        let f = self.inner.provision(req, fence);
        self.metrics
            .timed(PROVIDER, "provision", f, Result::is_err)
            .await
    }
    async fn destroy_fenced(&self, instance: &str, fence: &dyn Fence) -> Result<(), ProviderError> {
        let f = self.inner.destroy_fenced(instance, fence);
        self.metrics
            .timed(PROVIDER, "destroy", f, Result::is_err)
            .await
    }
    async fn describe(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        let f = self.inner.describe(tags);
        self.metrics
            .timed(PROVIDER, "describe", f, Result::is_err)
            .await
    }
    async fn describe_fresh(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        let f = self.inner.describe_fresh(tags);
        self.metrics
            .timed(PROVIDER, "describe", f, Result::is_err)
            .await
    }
    async fn label(
        &self,
        instance: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn Fence,
    ) -> Result<(), ProviderError> {
        let f = self.inner.label(instance, labels, fence);
        self.metrics
            .timed(PROVIDER, "label", f, Result::is_err)
            .await
    }
}

/// A swarm whose engine calls are counted and timed.
pub(crate) struct MeteredCluster {
    pub(crate) inner: Arc<dyn Cluster>,
    pub(crate) metrics: Metrics,
}

#[async_trait]
impl Cluster for MeteredCluster {
    async fn observe(&self) -> SwarmView {
        let f = self.inner.observe();
        let failed = |v: &SwarmView| matches!(v, SwarmView::Unavailable(_));
        self.metrics.timed(ENGINE, "observe", f, failed).await
    }
    async fn services(&self) -> Services {
        let f = self.inner.services();
        let failed = |s: &Services| matches!(s, Services::Unknown(_));
        self.metrics.timed(ENGINE, "services", f, failed).await
    }
    async fn drain(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        let f = self.inner.drain(node, fence);
        self.metrics.timed(ENGINE, "drain", f, Result::is_err).await
    }
    async fn demote(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        let f = self.inner.demote(node, fence);
        self.metrics
            .timed(ENGINE, "demote", f, Result::is_err)
            .await
    }
    async fn promote(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        let f = self.inner.promote(node, fence);
        self.metrics
            .timed(ENGINE, "promote", f, Result::is_err)
            .await
    }
    async fn activate(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        let f = self.inner.activate(node, fence);
        self.metrics
            .timed(ENGINE, "activate", f, Result::is_err)
            .await
    }
    async fn demote_self_and_leave(
        &self,
        node: &str,
        fence: &dyn Fence,
        left: &(dyn Fn() + Send + Sync),
    ) -> Result<(), ClusterError> {
        let f = self.inner.demote_self_and_leave(node, fence, left);
        self.metrics
            .timed(ENGINE, "demote_self_and_leave", f, Result::is_err)
            .await
    }
    async fn remove_node(
        &self,
        node: &str,
        force: bool,
        fence: &dyn Fence,
    ) -> Result<(), ClusterError> {
        let f = self.inner.remove_node(node, force, fence);
        self.metrics
            .timed(ENGINE, "remove_node", f, Result::is_err)
            .await
    }
    async fn heal_ghost(&self, node: &str, fence: &dyn Fence) -> Result<(), ClusterError> {
        let f = self.inner.heal_ghost(node, fence);
        self.metrics
            .timed(ENGINE, "heal_ghost", f, Result::is_err)
            .await
    }
    async fn rotate_join_token(&self, role: Role, fence: &dyn Fence) -> Result<(), ClusterError> {
        let f = self.inner.rotate_join_token(role, fence);
        self.metrics
            .timed(ENGINE, "rotate_join_token", f, Result::is_err)
            .await
    }
    async fn join_material(&self, role: Role) -> Result<Option<JoinMaterial>, ClusterError> {
        let f = self.inner.join_material(role);
        self.metrics
            .timed(ENGINE, "join_material", f, Result::is_err)
            .await
    }
}
