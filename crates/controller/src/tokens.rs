//! Join tokens left readable in user data made useless: the shell of
//! [`drover_core::join_token`]. A provider that
//! [exposes](drover_spi::InstanceProvider::exposes_boot_env) the boot
//! environment (EC2's user data stays readable for the instance's life)
//! is given the join token like any other, and the controller rotates the
//! role's token once no machine that may hold it still awaits its join.
//!
//! A rotation is one idempotent swarm update, so it is not journaled: a
//! controller that dies before it rotates leaves the token exposed, and the
//! next term assumes every such role exposed ([`Tokens::assume_exposed`])
//! and rotates it once nothing awaits. Each rotation is an event (the role
//! only: no token is ever read here).

use crate::context::Context;
use crate::execute::{StepError, Tenure};
use drover_core::join_token::{Tokens, awaiting_after};
use drover_core::journal::Operation;
use drover_core::model::{SwarmView, Time};
use drover_core::plan::{Action, Desired, Plan};
use drover_core::spec::Role;
use drover_spi::ClusterError;
use std::collections::BTreeSet;

/// The groups on a provider that exposes the boot environment.
fn exposing_groups(ctx: &Context, desired: &Desired) -> BTreeSet<String> {
    desired
        .groups
        .iter()
        .filter(|g| {
            ctx.providers
                .get(&g.spec.instance.provider_key())
                .is_some_and(|p| p.exposes_boot_env())
        })
        .map(|g| g.spec.name.clone())
        .collect()
}

/// A new term's view of the tokens: both roles exposed when any provider
/// configured exposes the boot environment (the term before may have
/// placed them, also for a group no longer declared whose machines are
/// not collected yet; one rotation too many is harmless).
pub(crate) fn new_term(ctx: &Context, now: Time) -> Tokens {
    let exposes = ctx.providers.values().any(|p| p.exposes_boot_env());
    let roles = if exposes {
        vec![Role::Manager, Role::Worker]
    } else {
        Vec::new()
    };
    Tokens::assume_exposed(roles, now)
}

/// Records a provision about to start: a joining machine on an exposing
/// provider will hold its role's current token in readable user data.
pub(crate) fn note(
    tokens: &mut Tokens,
    ctx: &Context,
    desired: &Desired,
    action: &Action,
    now: Time,
) {
    if let Action::Provision { group, role, .. } = action
        && exposing_groups(ctx, desired).contains(group)
    {
        tokens.placed(*role, now);
    }
}

/// Rotates every role whose token is due, each under a fresh
/// confirmation of `term`; the outcome of each, in order.
pub(crate) async fn rotate_due(
    ctx: &Context,
    term: &Tenure,
    tokens: &mut Tokens,
    journal: &[&Operation],
    plan: &Plan,
    swarm: &SwarmView,
    now: Time,
) -> Vec<(Role, Result<(), StepError>)> {
    // Nothing exposed (every provider but ec2): nothing to look at.
    if tokens.due(&BTreeSet::new(), now).is_empty() {
        return Vec::new();
    }
    let Some(waiting) = awaiting_after(plan, journal.iter().copied(), swarm) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for role in tokens.due(&waiting, now) {
        let result = rotate(ctx, term, role).await;
        match &result {
            Ok(()) => tokens.rotated(role, now),
            Err(_) => tokens.failed(role, now),
        }
        out.push((role, result));
    }
    out
}

async fn rotate(ctx: &Context, term: &Tenure, role: Role) -> Result<(), StepError> {
    let lease = term
        .confirm(&format!("rotate-{}-token", role.as_str()))
        .await?;
    ctx.cluster
        .rotate_join_token(role, &lease)
        .await
        .map_err(|e| match e {
            ClusterError::Fenced(e) => StepError::Expired(e),
            e => e.into(),
        })
}
