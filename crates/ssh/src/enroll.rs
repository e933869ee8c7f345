//! Provision: a free host of the group's inventory enrolled, its boot
//! script started on it.

use crate::SshProvider;
use crate::inventory::Target;
use crate::listing::run_error;
use crate::record::{Answer, NoHost, Record, choose};
use crate::script;
use drover_core::model::tags;
use drover_core::spec::ssh::SshProperties;
use drover_spi::{Fence, ProviderError, ProvisionRequest, Secret};
use std::time::Duration;

/// How long a step of an enrollment (a claim, the script's upload, its
/// start) may take on the host.
const STEP_WITHIN: Duration = Duration::from_secs(60);

impl SshProvider {
    /// Enrolls a host for `req` (see the crate's guarantees).
    pub(crate) async fn enroll(
        &self,
        req: ProvisionRequest,
        fence: &dyn Fence,
    ) -> Result<String, ProviderError> {
        let props = SshProperties::parse(&req.properties).map_err(|problems| {
            ProviderError::Permanent(drover_core::spec::describe_properties(&problems))
        })?;
        let targets: Vec<Target> = Target::of(&props, true);
        let _one_at_a_time = self.enrolling.lock().await;
        let answers = futures_util::future::join_all(targets.iter().map(|t| self.ask(t))).await;
        // Idempotent on the link (the journal's operation): the host an
        // earlier call enrolled is the answer, booted if it was not yet.
        if let Some(link) = req.tags.get(tags::LINK) {
            let mine = targets.iter().zip(&answers).find_map(|(t, a)| match a {
                Answer::Enrolled(r) if r.tags.get(tags::LINK) == Some(link) => Some((t, r)),
                _ => None,
            });
            if let Some((t, r)) = mine {
                if !self.booted(t).await? {
                    fence.check()?;
                    self.boot(t, &req).await?;
                }
                return Ok(r.id.clone());
            }
        }
        let (t, record) = self.claim(&props, &targets, &answers, &req, fence).await?;
        self.boot(&t, &req).await?;
        tracing::info!(host = %t.name(), instance = %record.id, "host enrolled");
        Ok(record.id)
    }

    /// Claims a free host for `req`: the first one whose claim succeeds
    /// (another may have been claimed since it answered free).
    async fn claim(
        &self,
        props: &SshProperties,
        targets: &[Target],
        answers: &[Answer],
        req: &ProvisionRequest,
        fence: &dyn Fence,
    ) -> Result<(Target, Record), ProviderError> {
        let zone = req.tags.get(tags::ZONE).map(String::as_str);
        let mut taken: Vec<String> = Vec::new();
        // What the claims found: a host refused for its engine's swarm is
        // no longer free (a pet's is its slot's refusal; cattle go on to
        // the next free host, and an exhausted inventory names it).
        let mut answers = answers.to_vec();
        loop {
            let host = choose(
                &props.hosts,
                &answers,
                req.logical_id.as_deref(),
                zone,
                &taken,
            )
            .map_err(no_host)?;
            let t = targets
                .iter()
                .find(|t| t.login.host == *host)
                .cloned()
                .ok_or_else(|| {
                    ProviderError::Permanent(format!("host {} vanished", host.name()))
                })?;
            let record = Record::new(host, req.tags.clone(), now_ms());
            fence.check()?;
            let claim = script::claim(&host.state_dir, &t.docker_socket);
            let ran = self
                .links
                .run(&t, &claim, record.to_text().as_bytes(), STEP_WITHIN)
                .await
                .map_err(|e| run_error(&format!("claiming host {}", t.name()), e))?;
            match ran.stdout.trim() {
                "claimed" => {
                    self.remember(&t.name(), &Answer::Enrolled(record.clone()));
                    return Ok((t, record));
                }
                "taken" => taken.push(t.name()),
                said if said.starts_with(script::IN_SWARM) => {
                    let why = in_swarm(&t.name(), said[script::IN_SWARM.len()..].trim());
                    tracing::warn!(host = %t.name(), "{why}");
                    if let Some(i) = targets.iter().position(|x| x.name() == t.name()) {
                        answers[i] = Answer::InSwarm(why);
                    }
                }
                _ => return Err(failed(&format!("claiming host {}", t.name()), &ran)),
            }
        }
    }

    /// True when host `t`'s boot script was started.
    async fn booted(&self, t: &Target) -> Result<bool, ProviderError> {
        let ran = self
            .links
            .run(
                t,
                &script::booted(&t.login.host.state_dir),
                b"",
                STEP_WITHIN,
            )
            .await
            .map_err(|e| run_error(&format!("asking host {}", t.name()), e))?;
        Ok(ran.stdout.trim() == "yes")
    }

    /// Renders the boot script for host `t`, writes it there and starts
    /// it with its environment on standard input.
    async fn boot(&self, t: &Target, req: &ProvisionRequest) -> Result<(), ProviderError> {
        let mut ctx = req.boot_context.clone();
        ctx.address = t.login.host.advertise_address.clone();
        let text = drover_core::template::render(&req.boot_template, &ctx)
            .map_err(|e| ProviderError::Permanent(format!("boot script: {e}")))?;
        let dir = &t.login.host.state_dir;
        let what = format!("starting the boot script on host {}", t.name());
        let ran = self
            .links
            .run(t, &script::upload_boot(dir), text.as_bytes(), STEP_WITHIN)
            .await
            .map_err(|e| run_error(&what, e))?;
        if !ran.ok() {
            return Err(failed(&what, &ran));
        }
        let env = self.boot_env(t, req);
        let exports =
            drover_core::template::sh_exports(env.iter().map(|(k, v)| (k.as_str(), v.expose())));
        let ran = self
            .links
            .run(
                t,
                &script::launch_boot(dir),
                exports.as_bytes(),
                STEP_WITHIN,
            )
            .await
            .map_err(|e| run_error(&what, e))?;
        match ran.ok() {
            true => Ok(()),
            false => Err(failed(&what, &ran)),
        }
    }

    /// The boot script's environment: the request's (secrets among it),
    /// where its engine and drover's state directory are, and for a
    /// manager's controller where it keeps its own connections.
    fn boot_env(&self, t: &Target, req: &ProvisionRequest) -> Vec<(String, Secret)> {
        let mut env = req.boot_env.clone();
        let mut add = |k: &str, v: String| env.push((k.to_string(), Secret::new(v)));
        add("DOCKER_HOST", format!("unix://{}", t.docker_socket));
        add("DROVER_STATE_DIR", t.login.host.state_dir.clone());
        if req.boot_context.role == drover_core::spec::Role::Manager.as_str() {
            add("DROVER_SSH_DIR", self.host_dir.clone());
        }
        env
    }
}

/// No host for the slot, as the planner reads it: an inventory with no
/// free host (in the zone) has no capacity, so a slot may move to another
/// zone, unless a host was refused (a changed host key, a missing key
/// file): that is the operator's to fix, said as a refusal. A pet's host
/// taken or not reachable may free up; a pet naming no host of the
/// inventory never will.
fn no_host(e: NoHost) -> ProviderError {
    match e {
        NoHost::Exhausted { refused: true, .. }
        | NoHost::PetSilent { lasting: true, .. }
        | NoHost::PetRefused { .. }
        | NoHost::NotInInventory(_) => ProviderError::Permanent(e.to_string()),
        NoHost::Exhausted { .. } => ProviderError::Capacity(e.to_string()),
        NoHost::PetTaken { .. } | NoHost::PetSilent { .. } => {
            ProviderError::Transient(e.to_string())
        }
    }
}

/// Why host `host`, whose engine is in swarm state `state`, is refused.
fn in_swarm(host: &str, state: &str) -> String {
    format!(
        "host {host} is refused: its engine is already part of a swarm (swarm state {state}) and the host holds no enrollment of this cluster: make it leave that swarm first (`docker swarm leave` on the host, after demoting and removing it there if it is a manager), or take it out of instance.properties.hosts"
    )
}

/// A script that ran and failed: its status and the end of what it said.
pub(crate) fn failed(what: &str, ran: &crate::link::Ran) -> ProviderError {
    let said = drover_core::boot::BootLog::tail(&format!("{}{}", ran.stdout, ran.stderr));
    ProviderError::Transient(format!(
        "{what}: exited with status {:?}: {}",
        ran.status,
        said.last(3)
    ))
}

/// Now, as the record keeps it (ms since the Unix epoch).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
