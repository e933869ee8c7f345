//! One observation: the store, the swarm and every provider, read
//! concurrently.

use crate::context::Context;
use drover_core::journal::{Operation, Step};
use drover_core::model::{Described, Instance, LeftReport, Observed, Services, SwarmView, tags};
use drover_core::plan::Desired;
use drover_core::spec::ClusterSpec;
use drover_spi::{Controls, ProviderError, Revision, StoreError};
use futures_util::future::join_all;
use std::collections::{BTreeMap, BTreeSet};

/// What the store holds for planning.
pub(crate) struct Stored {
    pub(crate) revision: Revision,
    pub(crate) desired: Desired,
    pub(crate) journal: Vec<Operation>,
}

/// The planner's view of `spec` under the operator's controls.
fn desired(
    cluster_id: &str,
    spec: &ClusterSpec,
    is_rollback: bool,
    controls: &Controls,
) -> Desired {
    let mut desired = Desired::of_spec(cluster_id, spec);
    for g in &mut desired.groups {
        g.paused = controls.paused.contains(&g.spec.name);
        g.is_rollback = is_rollback;
    }
    Desired {
        held: controls.held.clone(),
        replace: controls.replace.clone(),
        skip_drain: controls.skip_drain.clone(),
        ..desired
    }
}

/// Reads the store. `None` when nothing was committed yet.
pub(crate) async fn stored(ctx: &Context) -> Result<Option<Stored>, StoreError> {
    let (id, rev, controls, journal) = futures_util::try_join!(
        ctx.store.cluster_id(),
        ctx.store.desired(),
        ctx.store.controls(),
        ctx.store.journal()
    )?;
    let (Some(cluster_id), Some(revision)) = (id, rev) else {
        return Ok(None);
    };
    let desired = desired(&cluster_id, &revision.spec, revision.is_rollback, &controls);
    Ok(Some(Stored {
        revision,
        desired,
        journal,
    }))
}

/// Observes the swarm and describes every provider's machines of this
/// cluster, once each, sorted into their groups: a declared group's
/// machines from its own provider, and the machines of groups that are no
/// longer declared (orphans, docs/gc.md) from every provider. One describe
/// by cluster id per provider lists both, so a pass neither asks nor copies
/// a machine twice (a pass over 1000 machines spends its time there). A provider failure is recorded as
/// [`Described::Failed`], never as "none".
///
/// This is the world as of now (each provider's listing asked for now,
/// [`InstanceProvider::describe_fresh`]): a new term's first look, an
/// operator's command. A pass looks with [`around`].
pub(crate) async fn world(ctx: &Context, desired: &Desired, journal: &[Operation]) -> Observed {
    let swarm = ctx.cluster.observe().await;
    look(ctx, desired, journal, swarm, Listing::Now).await
}

/// A pass's look ([`world`]) around a `swarm` view already taken (it takes
/// it while it reads the store), planning on each provider's newest
/// listing ([`InstanceProvider::describe`]).
pub(crate) async fn around(
    ctx: &Context,
    desired: &Desired,
    journal: &[Operation],
    swarm: SwarmView,
) -> Observed {
    look(ctx, desired, journal, swarm, Listing::Newest).await
}

/// Which listing of its machines a provider is asked for.
#[derive(Clone, Copy)]
enum Listing {
    /// Its newest, maybe being refreshed.
    Newest,
    /// One asked for now.
    Now,
}

async fn look(
    ctx: &Context,
    desired: &Desired,
    journal: &[Operation],
    swarm: SwarmView,
    listing: Listing,
) -> Observed {
    let filter = BTreeMap::from([(tags::CLUSTER.to_string(), desired.cluster_id.clone())]);
    let describes = ctx.providers.iter().map(|(name, p)| {
        let filter = &filter;
        async move {
            let listed = match listing {
                Listing::Newest => p.describe(filter).await,
                Listing::Now => p.describe_fresh(filter).await,
            };
            (name.as_str(), listed)
        }
    });
    let (described, left_reports, services) = tokio::join!(
        join_all(describes),
        left_reports(ctx, journal),
        services(ctx, &swarm)
    );
    Observed {
        instances: by_group(desired, journal, described),
        swarm,
        self_link: ctx.self_link.clone(),
        left_reports,
        services,
        boots: Default::default(),
        complete_listings: complete_listings(ctx, desired),
    }
}

/// The declared groups whose provider lists every machine it made
/// (`InstanceProvider::listing_is_complete`).
fn complete_listings(ctx: &Context, desired: &Desired) -> BTreeSet<String> {
    desired
        .groups
        .iter()
        .filter(|g| {
            ctx.providers
                .get(&g.spec.instance.provider)
                .is_some_and(|p| p.listing_is_complete())
        })
        .map(|g| g.spec.name.clone())
        .collect()
}

/// The services and their tasks, for the roll's service budgets, from a
/// swarm whose node list was had (else nothing would be disrupted anyway;
/// a pass without a swarm view asks nothing more of the engine).
async fn services(ctx: &Context, swarm: &SwarmView) -> Services {
    match swarm {
        SwarmView::Ok(_) => ctx.cluster.services().await,
        _ => Services::Unknown("the swarm cannot be observed".into()),
    }
}

/// The controllers' reports that their engine left the swarm, read from
/// their heartbeats, while a former leader's leave is awaited (a leader's
/// hand-over journaled, its victim another machine); nothing otherwise, so
/// a pass reads no heartbeats. A failed read is no report: the planner then
/// learns the leave from the engine, as with a swarm store (where a node
/// that left cannot write).
async fn left_reports(ctx: &Context, journal: &[Operation]) -> Vec<LeftReport> {
    let awaited = journal.iter().any(|op| {
        op.steps().contains(&Step::DemoteSelfAndLeave)
            && op
                .victim
                .as_ref()
                .is_some_and(|v| v.link.is_some() && v.link != ctx.self_link)
    });
    if !awaited || !ctx.store.outside_raft() {
        return Vec::new();
    }
    match ctx.store.heartbeats().await {
        Ok(beats) => beats
            .iter()
            .filter_map(|b| b.engine.as_ref()?.left_report())
            .collect(),
        Err(e) => {
            tracing::debug!(error = %e, "heartbeats unreadable: leaves are learnt from the engines");
            Vec::new()
        }
    }
}

/// Sorts each configured provider's machines of this cluster (`described`,
/// by provider name) into groups. A declared group reads its own provider's
/// machines only (one tagged with its name elsewhere is not its member, as a
/// describe of that provider alone would not list it) and fails with that
/// provider. Groups that are not declared pool every provider's machines;
/// groups named by journaled operations are always listed, so a destroyed
/// orphan reads as gone; if any provider's describe fails, every such group
/// is `Failed`: the missing provider might hold the very machine.
fn by_group(
    desired: &Desired,
    journal: &[Operation],
    described: Vec<(&str, Result<Vec<Instance>, ProviderError>)>,
) -> BTreeMap<String, Described> {
    let provider_of = |g: &str| {
        desired
            .groups
            .iter()
            .find(|d| d.spec.name == g)
            .map(|d| d.spec.instance.provider_key())
    };
    let mut out: BTreeMap<String, Described> = desired
        .groups
        .iter()
        .map(|g| {
            let provider = g.spec.instance.provider_key();
            let d = match described.iter().find(|(p, _)| *p == provider) {
                Some((_, Ok(_))) => Described::Ok(Vec::new()),
                Some((_, Err(e))) => Described::Failed(e.to_string()),
                None => {
                    let known: Vec<&str> = described.iter().map(|(p, _)| *p).collect();
                    let known = if known.is_empty() {
                        "none is".to_string()
                    } else {
                        format!("configured: {}", known.join(", "))
                    };
                    let hint = if provider == drover_core::spec::LOCAL_PROVIDER {
                        "; it needs --local-dir"
                    } else {
                        ""
                    };
                    Described::Failed(format!(
                        "no provider `{provider}` is configured here ({known}){hint}"
                    ))
                }
            };
            (g.spec.name.clone(), d)
        })
        .collect();
    let mut orphans: BTreeMap<String, Vec<Instance>> = journal
        .iter()
        .filter(|o| provider_of(&o.group).is_none())
        .map(|o| (o.group.clone(), Vec::new()))
        .collect();
    let mut failure = None;
    for (provider, result) in described {
        match result {
            Ok(list) => place(list, provider, &provider_of, &mut out, &mut orphans),
            Err(e) => failure = Some(e.to_string()),
        }
    }
    for (group, list) in orphans {
        let d = match &failure {
            Some(e) => Described::Failed(e.clone()),
            None => Described::Ok(list),
        };
        out.insert(group, d);
    }
    out
}

/// Moves one provider's listing into its groups: a machine goes to its
/// group when the group is served by this provider, to the orphans when
/// its group is not declared. The group most of the listing belongs to
/// keeps the listing's own buffer (the others' machines are taken out of
/// it first): at 10 000 members a second buffer filled beside the listing
/// was the largest block of a pass's heap.
fn place(
    mut list: Vec<Instance>,
    provider: &str,
    provider_of: &dyn Fn(&str) -> Option<String>,
    out: &mut BTreeMap<String, Described>,
    orphans: &mut BTreeMap<String, Vec<Instance>>,
) {
    let largest = largest_group(&list);
    let others: Vec<Instance> = list
        .extract_if(.., |i| i.tag(tags::GROUP) != largest.as_deref())
        .collect();
    let mut to = Destinations {
        provider,
        provider_of,
        out,
        orphans,
    };
    for i in others {
        if let Some(members) = i.tag(tags::GROUP).and_then(|g| to.members(g)) {
            members.push(i);
        }
    }
    if let Some(members) = largest.as_deref().and_then(|g| to.members(g)) {
        if members.is_empty() {
            *members = list;
        } else {
            members.append(&mut list);
        }
    }
}

/// Where one provider's machines go ([`place`]).
struct Destinations<'a> {
    provider: &'a str,
    provider_of: &'a dyn Fn(&str) -> Option<String>,
    out: &'a mut BTreeMap<String, Described>,
    orphans: &'a mut BTreeMap<String, Vec<Instance>>,
}

impl Destinations<'_> {
    /// The list a machine of `group` joins, if any: its group's when this
    /// provider serves it, the orphans' when no group is declared so.
    fn members(&mut self, group: &str) -> Option<&mut Vec<Instance>> {
        match (self.provider_of)(group) {
            Some(p) if p == self.provider => match self.out.get_mut(group) {
                Some(Described::Ok(members)) => Some(members),
                _ => None,
            },
            Some(_) => None,
            None => Some(self.orphans.entry(group.to_string()).or_default()),
        }
    }
}

/// The group tag most machines of `list` carry.
fn largest_group(list: &[Instance]) -> Option<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for group in list.iter().filter_map(|i| i.tag(tags::GROUP)) {
        *counts.entry(group).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .map(|(g, _)| g.to_string())
}

/// One observation against `spec`, as the planner would see it: the desired
/// state (with the store's controls), the world, and the journal. Nothing is
/// written (off-cluster checks: `drover plan --store`, `drover destroy`).
pub async fn snapshot(
    ctx: &Context,
    spec: &ClusterSpec,
) -> Result<(Desired, Observed, Vec<Operation>), StoreError> {
    let (id, controls, journal) = futures_util::try_join!(
        ctx.store.cluster_id(),
        ctx.store.controls(),
        ctx.store.journal()
    )?;
    let cluster_id = id.unwrap_or_else(|| "(new cluster)".into());
    let desired = desired(&cluster_id, spec, false, &controls);
    let observed = world(ctx, &desired, &journal).await;
    Ok((desired, observed, journal))
}

/// What the planner would do now if `spec` were committed: one observation,
/// one planning pass, nothing written or acted on (`drover plan --store`).
pub async fn preview(
    ctx: &Context,
    spec: &ClusterSpec,
) -> Result<drover_core::plan::Plan, StoreError> {
    Ok(preview_with_rollout(ctx, spec).await?.plan)
}

/// [`preview`], with the whole rollout it starts: every due member in the
/// order the roll takes it, with its engine's version (`drover plan`).
pub async fn preview_with_rollout(
    ctx: &Context,
    spec: &ClusterSpec,
) -> Result<Preview, StoreError> {
    let (desired, observed, journal) = snapshot(ctx, spec).await?;
    let memory = drover_core::plan::Memory::default();
    let input = || drover_core::plan::PlanInput {
        desired: &desired,
        observed: &observed,
        journal: &journal,
        memory: &memory,
        now: 0,
        wall_ms: crate::status::wall_ms(),
        nonce: 0,
    };
    Ok(Preview {
        plan: drover_core::plan::plan(input()),
        rollout: drover_core::plan::rollout(input()),
    })
}

/// What `drover plan` shows of the live cluster.
#[derive(Debug, serde::Serialize)]
pub struct Preview {
    /// The next steps.
    #[serde(flatten)]
    pub plan: drover_core::plan::Plan,
    /// Every due member, in the order the roll takes it.
    pub rollout: Vec<drover_core::plan::RollEntry>,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::by_group;
    use drover_core::journal::{OpKind, Operation};
    use drover_core::model::{Described, Instance, tags};
    use drover_core::plan::Desired;
    use drover_core::spec::{Role, parse_str};
    use drover_spi::ProviderError;

    /// A machine of cluster `c1` tagged for `group` (read as a provider's
    /// record would be).
    fn machine(id: &str, group: &str) -> Instance {
        let tags = serde_json::json!({tags::CLUSTER: "c1", tags::GROUP: group});
        serde_json::from_value(
            serde_json::json!({"id": id, "tags": tags, "running": true, "created_ms": 0}),
        )
        .expect("an instance")
    }

    /// A journaled operation of `group` (id `<group>-op`).
    pub(crate) fn op(group: &str) -> Operation {
        Operation {
            id: format!("{group}-op"),
            group: group.into(),
            kind: OpKind::Retire,
            role: Role::Worker,
            victim: None,
            target: None,
            surge: false,
            done: Default::default(),
            intent: None,
            collection: None,
            provision_failures: 0,
            short_zones: Vec::new(),
            hook_failure: None,
            in_place: false,
            update_failure: None,
        }
    }

    fn ids(d: Option<&Described>) -> Result<Vec<&str>, String> {
        match d {
            Some(Described::Ok(list)) => Ok(list.iter().map(|i| i.id.as_str()).collect()),
            Some(Described::Failed(e)) => Err(e.clone()),
            None => Err("not listed".into()),
        }
    }

    fn desired() -> Desired {
        let spec = parse_str(
            "groups:
- name: web
  role: worker
  allocation: {size: 1}
  instance: {provider: a}
- name: db
  role: worker
  allocation: {size: 1}
  instance: {provider: b}
- name: lost
  role: worker
  allocation: {size: 1}
  instance: {provider: nowhere}
",
        )
        .spec
        .expect("valid spec");
        Desired::of_spec("c1", &spec)
    }

    #[test]
    fn each_group_reads_its_own_provider_and_orphans_pool_every_provider() {
        let desired = desired();
        let journal = [op("gone")];
        let described = vec![
            (
                "a",
                Ok(vec![
                    machine("a-web", "web"),
                    machine("a-db", "db"),
                    machine("a-old", "old"),
                ]),
            ),
            (
                "b",
                Ok(vec![machine("b-db", "db"), machine("b-old", "old")]),
            ),
        ];
        let out = by_group(&desired, &journal, described);
        assert_eq!(ids(out.get("web")), Ok(vec!["a-web"]));
        // A machine tagged `db` on the other provider is not db's member.
        assert_eq!(ids(out.get("db")), Ok(vec!["b-db"]));
        assert_eq!(ids(out.get("old")), Ok(vec!["a-old", "b-old"]));
        // Named by the journal: listed, so its destroyed orphan reads as gone.
        assert_eq!(ids(out.get("gone")), Ok(vec![]));
        let lost = ids(out.get("lost")).unwrap_err();
        assert!(lost.contains("no provider `nowhere`"), "{lost}");
    }

    #[test]
    fn a_failed_describe_fails_its_groups_and_every_undeclared_one() {
        let desired = desired();
        let described = vec![
            (
                "a",
                Ok(vec![machine("a-web", "web"), machine("a-old", "old")]),
            ),
            ("b", Err(ProviderError::Transient("throttled".into()))),
        ];
        let out = by_group(&desired, &[], described);
        assert_eq!(ids(out.get("web")), Ok(vec!["a-web"]));
        assert!(ids(out.get("db")).unwrap_err().contains("throttled"));
        // Provider b might hold more of group old: nothing is concluded.
        assert!(ids(out.get("old")).unwrap_err().contains("throttled"));
    }

    /// At 10 000 members a second buffer filled beside the listing was a
    /// pass's largest heap block: the group most machines belong to keeps
    /// the listing's own, in its order.
    #[test]
    fn the_largest_group_keeps_the_listings_own_buffer() {
        let desired = desired();
        let mut listing: Vec<Instance> =
            (0..100).map(|n| machine(&format!("w{n}"), "web")).collect();
        listing.insert(50, machine("a-db", "db"));
        listing.insert(0, machine("a-old", "old"));
        let buffer = listing.as_ptr();
        let out = by_group(&desired, &[], vec![("a", Ok(listing)), ("b", Ok(vec![]))]);
        let Some(Described::Ok(web)) = out.get("web") else {
            panic!("web: {:?}", ids(out.get("web")));
        };
        let expected: Vec<String> = (0..100).map(|n| format!("w{n}")).collect();
        let got: Vec<&str> = web.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(got, expected);
        assert_eq!(web.as_ptr(), buffer, "web's machines were copied");
        assert_eq!(ids(out.get("old")), Ok(vec!["a-old"]));
        // db is served by provider b: a machine tagged db on a is not its.
        assert_eq!(ids(out.get("db")), Ok(vec![]));
    }
}
