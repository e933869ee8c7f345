//! # drover-ec2
//!
//! The `ec2` provider: each machine is an Amazon EC2 instance, launched
//! from the group's properties ([`drover_core::spec::ec2::Ec2Properties`],
//! which `drover validate` checks offline) with its boot script as user
//! data. drover talks to EC2's Query API ([`api`]) through a rate-limited,
//! retrying client ([`client`]); the translations between drover's
//! requests and EC2's parameters and answers are pure ([`machine`],
//! [`xml`]).
//!
//! ## The client, and why not `aws-sdk-ec2`
//! A lean client on maintained crates: `reqsign-aws-v4` signs (SigV4) and
//! loads credentials from the standard chain (environment, shared profile,
//! web identity, ECS, IMDSv2), `reqwest` (rustls on ring) sends, and
//! `quick-xml` reads the five answers drover needs. As measured for issue
//! 19 on this project's 2-core builders: `aws-sdk-ec2` costs ≈ 290 s of cold debug
//! build and 8.4 GB peak memory (≈ 170 s with its debug info off), the
//! lean client ≈ 36 s and 0.4 GB; the SDK's thousands of generated
//! operations would serve five calls. Signing is never written by hand.
//!
//! ## Safety
//! - A launch is `RunInstances` of exactly one instance with a
//!   `ClientToken` derived from the journal's operation (the link tag),
//!   identical on every retry by any controller: a lost answer or a crash
//!   never makes a second instance. Tags go on at launch
//!   (`TagSpecifications`, instance and volumes), never later, so no
//!   instance ever exists without drover's ownership tags.
//! - Describes filter on the tags asked for (drover's cluster tag) and on
//!   the live states, page through `NextToken`, and fail as errors, never
//!   as an empty list. An instance this process launched counts as
//!   present while EC2's describes do not list it yet
//!   ([`machine::Young`]).
//! - A pass plans on the newest describe's answer while the next one runs
//!   ([`listing`]), with this process's own launches, terminations and
//!   labels since that describe laid over it; it waits for a describe of
//!   its own for the first, after a failed one and past [`listing::MAX_AGE`].
//! - Terminating an absent or terminated instance is success, except for
//!   one launched moments ago (EC2 may not know it yet).
//! - Secrets: user data stays readable for the instance's life
//!   (`DescribeInstanceAttribute`, the metadata service). The boot
//!   environment goes there as `export` lines, so the provider declares
//!   it ([`InstanceProvider::exposes_boot_env`]) and the controller
//!   rotates a join token once no machine given it still awaits its join;
//!   the store address is configuration (it carries no credential).
//!   Anything else in the environment is refused, naming the variables,
//!   never their values ([`machine::PLACEABLE_ENV`]; docs/ec2.md,
//!   "Secrets").

// Production functions stay short enough to read at once (clippy.toml:
// 80 lines); tests may be long scenarios.
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

pub mod api;
pub mod client;
mod console;
pub mod listing;
pub mod machine;
pub mod throttle;
pub mod xml;

use api::{Api, ApiError, Credentials};
use async_trait::async_trait;
use client::{CallError, Client, Metrics, Retry};
use drover_core::model::{Instance, tags};
use drover_core::spec::ec2::Ec2Properties;
use drover_spi::{Fence, InstanceProvider, ProviderCall, ProviderError, ProvisionRequest};
use listing::{Answer, Listings, Since};
use machine::{Launch, Unfit, Young};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use throttle::Rates;

/// Where and how the provider reaches EC2.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The region every call goes to (a group's `region` must match it).
    pub region: String,
    /// Another endpoint than the region's (e.g. moto's, or a VPC endpoint).
    pub endpoint: Option<String>,
    /// Where credentials come from.
    pub credentials: Credentials,
    /// The client-side rate limits.
    pub rates: Rates,
    /// How calls are retried.
    pub retry: Retry,
    /// Instances per describe page ([`machine::MAX_PAGE`]; smaller in
    /// tests, to page through few instances).
    pub page: u32,
}

impl Settings {
    /// The standard credential chain, EC2's default rates, in `region`.
    pub fn new(region: &str, endpoint: Option<&str>) -> Settings {
        Settings {
            region: region.to_string(),
            endpoint: endpoint.map(str::to_string),
            credentials: Credentials::Chain,
            rates: Rates::default(),
            retry: Retry::default(),
            page: machine::MAX_PAGE,
        }
    }
}

/// The `ec2` provider.
#[derive(Debug, Clone)]
pub struct Ec2Provider {
    client: Client,
    /// The endpoint asked for, if not the region's (handed on to managers).
    endpoint: Option<String>,
    page: u32,
    known: Arc<Mutex<Known>>,
}

/// What this process knows of its instances beyond EC2's last answer.
#[derive(Debug, Default)]
struct Known {
    young: Young,
    since: Since,
    listings: Listings,
}

impl Ec2Provider {
    /// Instances in `settings.region`.
    pub fn new(settings: Settings) -> Ec2Provider {
        let api = Api::new(
            "ec2",
            &settings.region,
            settings.endpoint.as_deref(),
            settings.credentials,
        );
        Ec2Provider {
            client: Client::new(api, settings.rates, settings.retry),
            endpoint: settings.endpoint,
            page: settings.page,
            known: Arc::default(),
        }
    }

    /// The API counters (calls and throttles by action).
    pub fn metrics(&self) -> &Metrics {
        self.client.metrics()
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Describes now, keeping the answer for the passes after this one. A
    /// describe cut short (its task aborted, its runtime gone) counts as
    /// failed: the next pass describes for itself.
    async fn refresh(&self, tags: &BTreeMap<String, String>) -> Result<Answer, CallError> {
        let sent = Instant::now();
        let mut unanswered = Unanswered {
            provider: self,
            tags,
            sent,
            armed: true,
        };
        let listed = self.list(tags).await;
        unanswered.armed = false;
        let kept = listed.as_ref().ok().cloned();
        self.known().listings.answered(tags, sent, kept);
        listed.map(|instances| Answer { sent, instances })
    }

    /// `answer` with what this process did since its describe was sent.
    fn with_own_changes(&self, answer: Answer, tags: &BTreeMap<String, String>) -> Vec<Instance> {
        let now = Instant::now();
        let mut listed = answer.instances;
        let mut known = self.known();
        known.young.complete(&mut listed, tags, now);
        known.since.apply(&mut listed, answer.sent, now);
        listed
    }

    /// What a manager's controller needs to serve this provider too (the
    /// flags `--ec2`, `--ec2-region`, `--ec2-endpoint` as environment):
    /// configuration, placed in its user data beside the store address.
    fn settings_for_managers(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![
            ("DROVER_EC2", "true".to_string()),
            ("AWS_REGION", self.client.region().to_string()),
        ];
        if let Some(endpoint) = &self.endpoint {
            out.push(("DROVER_EC2_ENDPOINT", endpoint.clone()));
        }
        out
    }

    /// The launch's properties, checked as `drover validate` does, and
    /// in this provider's region.
    fn properties(&self, req: &ProvisionRequest) -> Result<Ec2Properties, ProviderError> {
        let zone = req.tags.get(tags::ZONE).map(String::as_str);
        let props = Ec2Properties::parse(&req.properties, &[zone]).map_err(|problems| {
            ProviderError::Permanent(drover_core::spec::describe_properties(&problems))
        })?;
        if let Some(r) = &props.region
            && r != self.client.region()
        {
            return Err(ProviderError::Permanent(format!(
                "instance.properties.region: {r} is not this provider's region {} (--ec2-region): one controller serves one region",
                self.client.region()
            )));
        }
        Ok(props)
    }

    /// Every live instance carrying all of `tags`, as EC2 lists them
    /// (every page).
    pub async fn list(&self, tags: &BTreeMap<String, String>) -> Result<Vec<Instance>, CallError> {
        let mut out = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let params = machine::describe_params(tags, self.page, next.as_deref());
            let text = self.client.call("DescribeInstances", &params, None).await?;
            let page: xml::DescribeInstances = parse("DescribeInstances", &text)?;
            out.extend(
                page.reservation_set
                    .items
                    .iter()
                    .flat_map(|r| &r.instances_set.items)
                    .filter_map(machine::instance),
            );
            match page.next_token.filter(|t| !t.is_empty()) {
                Some(t) => next = Some(t),
                None => return Ok(out),
            }
        }
    }
}

fn parse<T: for<'de> serde::Deserialize<'de>>(
    action: &'static str,
    text: &str,
) -> Result<T, CallError> {
    xml::parse(text).map_err(|e| CallError::Api {
        action,
        source: ApiError::Transport(format!("unreadable answer: {e}")),
    })
}

/// A call's failure as a provider error: what retrying may fix is
/// transient (throttling past the retries, a lost answer, AWS's 5xx); a
/// zone out of capacity is its own kind (the planner tries another zone);
/// AWS's refusal of the request is permanent, with AWS's error code.
fn provider_error(e: CallError) -> ProviderError {
    match e {
        CallError::Fenced(f) => ProviderError::Fenced(f),
        CallError::Api { ref source, .. } if source.is_capacity() => {
            ProviderError::Capacity(e.to_string())
        }
        CallError::Api { ref source, .. } if source.is_retryable() => {
            ProviderError::Transient(e.to_string())
        }
        CallError::Api { ref source, .. } if is_not_found(source) => {
            ProviderError::NotFound(e.to_string())
        }
        // A pet's address still held by the instance it replaces, which
        // EC2 frees once that one is terminated.
        CallError::Api { ref source, .. } if source.code() == Some("InvalidIPAddress.InUse") => {
            ProviderError::Transient(e.to_string())
        }
        CallError::Api { .. } => ProviderError::Permanent(e.to_string()),
    }
}

fn is_not_found(e: &ApiError) -> bool {
    e.code() == Some("InvalidInstanceID.NotFound")
}

/// A describe in flight: dropped before it answered, it is recorded as
/// failed (else its filter would wait for it until its answer is too old).
struct Unanswered<'a> {
    provider: &'a Ec2Provider,
    tags: &'a BTreeMap<String, String>,
    sent: Instant,
    armed: bool,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.provider
                .known()
                .listings
                .answered(self.tags, self.sent, None);
        }
    }
}

#[async_trait]
impl InstanceProvider for Ec2Provider {
    /// Queues for a token of the call's family before the controller's
    /// lease starts (a roll of many machines at EC2's 2 launches/s would
    /// otherwise spend its 1 s lease waiting, and find it expired).
    async fn ready(&self, call: ProviderCall) {
        let family = match call {
            ProviderCall::Provision => throttle::Family::Run,
            ProviderCall::Destroy => throttle::Family::Mutate,
        };
        self.client.prepay(family).await
    }

    /// User data stays readable for the instance's life: the controller
    /// rotates a join token given here once it has served.
    fn exposes_boot_env(&self) -> bool {
        true
    }

    /// Its console output (`GetConsoleOutput`).
    async fn boot_log(
        &self,
        instance: &str,
    ) -> Result<Option<drover_core::boot::BootLog>, ProviderError> {
        self.console_log(instance).await
    }

    async fn provision(
        &self,
        req: ProvisionRequest,
        fence: &dyn Fence,
    ) -> Result<String, ProviderError> {
        let group = req.tags.get(tags::GROUP).cloned().unwrap_or_default();
        let props = self.properties(&req)?;
        let unfit = |e: Unfit| ProviderError::Permanent(e.to_string());
        let link = req
            .tags
            .get(tags::LINK)
            .ok_or(Unfit::NoLink)
            .map_err(unfit)?;
        let cluster = req.tags.get(tags::CLUSTER).map_or("", String::as_str);
        let mut ctx = req.boot_context.clone();
        ctx.address = req.logical_id.clone().unwrap_or_default();
        let script = drover_core::template::render(&req.boot_template, &ctx)
            .map_err(|e| ProviderError::Permanent(format!("group {group:?}: boot script: {e}")))?;
        let manager = ctx.role == drover_core::spec::Role::Manager.as_str();
        let settings = self.settings_for_managers();
        let env: Vec<(&str, &str)> = req
            .boot_env
            .iter()
            .map(|(k, v)| (k.as_str(), v.expose()))
            .chain(
                settings
                    .iter()
                    .filter(|_| manager)
                    .map(|(k, v)| (*k, v.as_str())),
            )
            .collect();
        let user_data = machine::user_data(&group, &script, &env).map_err(unfit)?;
        drover_core::spec::ec2::check_user_data(user_data.len()).map_err(|source| {
            unfit(Unfit::UserDataTooLarge {
                group: group.clone(),
                source,
            })
        })?;
        let token = machine::client_token(cluster, link);
        let params = machine::run_params(&Launch {
            props: &props,
            tags: &req.tags,
            zone: req.tags.get(tags::ZONE).map(String::as_str),
            private_ip: req.logical_id.as_deref(),
            user_data: &user_data,
            client_token: &token,
        })
        .map_err(unfit)?;
        let text = match self.client.call("RunInstances", &params, Some(fence)).await {
            Ok(text) => text,
            // The token was used for this operation with other parameters
            // (e.g. a retry after the join address changed): its instance
            // exists; it is the answer once describes list it.
            Err(CallError::Api { source, .. })
                if source.code() == Some("IdempotentParameterMismatch") =>
            {
                // By cluster too, as every describe: a link names an
                // operation of this cluster's journal only.
                let mut mine = BTreeMap::from([(tags::LINK.to_string(), link.clone())]);
                if let Some(cluster) = req.tags.get(tags::CLUSTER) {
                    mine.insert(tags::CLUSTER.to_string(), cluster.clone());
                }
                let found = self.list(&mine).await.map_err(provider_error)?;
                return match found.first() {
                    Some(i) => Ok(i.id.clone()),
                    None => Err(ProviderError::Transient(format!(
                        "group {group:?}: the launch of operation {link} was made before with other parameters and is not listed yet"
                    ))),
                };
            }
            Err(e) => return Err(provider_error(e)),
        };
        let run: xml::RunInstances = parse("RunInstances", &text).map_err(provider_error)?;
        let Some(launched) = run.instances_set.items.first() else {
            return Err(ProviderError::Transient(
                "RunInstances answered without an instance".into(),
            ));
        };
        let instance = Instance {
            id: launched.instance_id.clone(),
            tags: req.tags.clone().into(),
            running: true,
            created_ms: machine::instance(launched).map_or(0, |i| i.created_ms),
        };
        let id = instance.id.clone();
        self.known().young.launched(instance, Instant::now());
        Ok(id)
    }

    async fn destroy_fenced(&self, instance: &str, fence: &dyn Fence) -> Result<(), ProviderError> {
        let params = [("InstanceId.1".to_string(), instance.to_string())];
        match self
            .client
            .call("TerminateInstances", &params, Some(fence))
            .await
        {
            Ok(_) => {}
            Err(CallError::Api { ref source, .. })
                if is_not_found(source) && self.known().young.holds(instance, Instant::now()) =>
            {
                return Err(ProviderError::Transient(format!(
                    "{instance} was launched moments ago and EC2 does not know it yet"
                )));
            }
            Err(CallError::Api { ref source, .. }) if is_not_found(source) => {}
            Err(e) => return Err(provider_error(e)),
        }
        // EC2 answered that it is shutting down (or knows it no more): so
        // the passes to come see it gone, also on an answer from before.
        let mut known = self.known();
        known.young.forget(instance);
        known.since.terminated(instance, Instant::now());
        Ok(())
    }

    async fn describe(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        let plan = self.known().listings.plan(tags, Instant::now());
        let answer = match plan {
            listing::Plan::Use { answer, refresh } => {
                if refresh {
                    let (me, tags) = (self.clone(), tags.clone());
                    tokio::spawn(async move {
                        if let Err(e) = me.refresh(&tags).await {
                            tracing::debug!(error = %e, "background describe failed; the next pass describes");
                        }
                    });
                }
                answer
            }
            listing::Plan::Wait => self.refresh(tags).await.map_err(provider_error)?,
        };
        Ok(self.with_own_changes(answer, tags))
    }

    /// A describe sent now, with this process's changes since laid over it
    /// (a launch EC2 does not list yet).
    async fn describe_fresh(
        &self,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<Instance>, ProviderError> {
        let answer = self.refresh(tags).await.map_err(provider_error)?;
        Ok(self.with_own_changes(answer, tags))
    }

    async fn label(
        &self,
        instance: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn Fence,
    ) -> Result<(), ProviderError> {
        let mut params = vec![("ResourceId.1".to_string(), instance.to_string())];
        for (i, (k, v)) in labels.iter().enumerate() {
            params.push((format!("Tag.{}.Key", i + 1), k.clone()));
            params.push((format!("Tag.{}.Value", i + 1), v.clone()));
        }
        match self.client.call("CreateTags", &params, Some(fence)).await {
            Ok(_) => {
                self.known()
                    .since
                    .labelled(instance, labels, Instant::now());
                Ok(())
            }
            Err(CallError::Api { ref source, .. })
                if is_not_found(source) && self.known().young.holds(instance, Instant::now()) =>
            {
                Err(ProviderError::Transient(format!(
                    "{instance} was launched moments ago and EC2 does not know it yet"
                )))
            }
            Err(e) => Err(provider_error(e)),
        }
    }
}

#[cfg(feature = "testkit")]
pub mod testkit;

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 37: `DescribeInstances` is eventually consistent, so an empty
    /// pet slot must read empty for a while before it is filled.
    #[test]
    fn its_listing_may_leave_a_machine_out() {
        let p = Ec2Provider::new(Settings::new("eu-west-1", Some("http://127.0.0.1:9")));
        assert!(!p.listing_is_complete());
    }

    fn answer(code: &str, status: u16) -> CallError {
        CallError::Api {
            action: "RunInstances",
            source: ApiError::Aws {
                code: code.into(),
                message: "m".into(),
                status,
            },
        }
    }

    #[test]
    fn a_zone_out_of_capacity_is_its_own_kind_and_not_retried() {
        for code in ["InsufficientInstanceCapacity", "InsufficientCapacity"] {
            let e = answer(code, 500);
            assert!(matches!(&e, CallError::Api { source, .. } if !source.is_retryable()));
            assert!(provider_error(e).is_capacity(), "{code}");
        }
        assert!(provider_error(answer("InternalError", 500)).is_transient());
        assert!(provider_error(answer("RequestLimitExceeded", 503)).is_transient());
        assert!(matches!(
            provider_error(answer("InvalidParameterValue", 400)),
            ProviderError::Permanent(_)
        ));
    }
}
