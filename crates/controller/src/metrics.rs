//! Prometheus metrics of one controller: what it saw on its last pass
//! (fault tolerance, members by health and config, rollout progress,
//! blocked groups), what it did (steps by kind and outcome, leadership
//! changes) and what its providers and engine cost (calls, errors,
//! latency). Names follow Prometheus conventions under the `drover_`
//! prefix; docs/metrics.md lists them.
//!
//! Recorded from values the planner already produced, so the metrics can
//! never tell a different story than `drover status`. Labels carry group
//! names, step kinds and call names only: never ids that grow without bound,
//! never secrets.

use crate::execute::Failure;
use drover_core::plan::{GroupStatus, MemberStatus, Phase, Plan};
use drover_core::quorum_probe::EngineView;
use drover_core::spec::Role;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

mod metered;

pub(crate) use metered::{MeteredCluster, MeteredProvider};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabel {
    group: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MemberLabels {
    group: String,
    health: String,
    current: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    group: String,
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BehindLabels {
    group: String,
    behind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabels {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    kind: String,
    class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    api: String,
    call: String,
}

type Latency = Family<CallLabels, Histogram, fn() -> Histogram>;

/// What a group's "last change" timestamp watches: its phase and member
/// counts as the planner reported them (not its `reason`, whose text may
/// change while nothing does).
#[derive(Clone, Debug, PartialEq, Eq)]
struct GroupShape {
    phase: Phase,
    desired: usize,
    members: usize,
    current: usize,
    healthy: usize,
    in_flight: usize,
}

impl GroupShape {
    fn of(g: &GroupStatus) -> GroupShape {
        GroupShape {
            phase: g.phase,
            desired: g.desired,
            members: g.members,
            current: g.current,
            healthy: g.healthy,
            in_flight: g.in_flight,
        }
    }
}

fn latency_histogram() -> Histogram {
    // 5 ms .. ~80 s: describes are milliseconds, provisioning is seconds.
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

/// One controller's metrics. Cheap to clone (shared inside).
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    swarm_fault_tolerance: Gauge,
    raft_members: Gauge,
    raft_reachable: Gauge,
    group_fault_tolerance: Family<GroupLabel, Gauge>,
    members: Family<MemberLabels, Gauge>,
    desired: Family<GroupLabel, Gauge>,
    progress: Family<GroupLabel, Gauge<f64, AtomicU64>>,
    phase: Family<PhaseLabels, Gauge>,
    behind: Family<BehindLabels, Gauge>,
    changed: Family<GroupLabel, Gauge<f64, AtomicU64>>,
    /// Each group's shape on the last pass and when (Unix seconds) it
    /// last differed from the pass before.
    shapes: Arc<Mutex<BTreeMap<String, (GroupShape, f64)>>>,
    blocked: Gauge,
    acting: Gauge,
    leader_known: Gauge,
    leader_seen: Gauge<f64, AtomicU64>,
    last_pass: Gauge<f64, AtomicU64>,
    leadership_changes: Counter,
    passes: Counter,
    steps_started: Family<StepLabels, Counter>,
    steps_failed: Family<FailureLabels, Counter>,
    calls: Family<CallLabels, Counter>,
    call_errors: Family<CallLabels, Counter>,
    call_latency: Latency,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every metric registered, all at zero.
    pub fn new() -> Self {
        Self::with(|_| {})
    }

    /// [`Metrics::new`], plus what `extra` registers under the same
    /// `drover_` prefix: a provider's own counters (the ec2 provider's API
    /// calls and throttles), served on the same endpoint.
    pub fn with(extra: impl FnOnce(&mut Registry)) -> Self {
        let mut r = Registry::with_prefix("drover");
        let m = Metrics::zeroed();
        m.register_world(&mut r);
        m.register_controller(&mut r);
        extra(&mut r);
        Metrics {
            registry: Arc::new(r),
            ..m
        }
    }

    /// Every metric at zero, registered nowhere yet.
    fn zeroed() -> Self {
        Metrics {
            registry: Arc::new(Registry::default()),
            swarm_fault_tolerance: Gauge::default(),
            raft_members: Gauge::default(),
            raft_reachable: Gauge::default(),
            group_fault_tolerance: Family::default(),
            members: Family::default(),
            desired: Family::default(),
            progress: Family::default(),
            phase: Family::default(),
            behind: Family::default(),
            changed: Family::default(),
            shapes: Arc::default(),
            blocked: Gauge::default(),
            acting: Gauge::default(),
            leader_known: Gauge::default(),
            leader_seen: Gauge::default(),
            last_pass: Gauge::default(),
            leadership_changes: Counter::default(),
            passes: Counter::default(),
            steps_started: Family::default(),
            steps_failed: Family::default(),
            calls: Family::default(),
            call_errors: Family::default(),
            call_latency: Family::new_with_constructor(latency_histogram),
        }
    }

    /// What the acting controller's last pass saw of the swarm and the
    /// groups.
    fn register_world(&self, r: &mut Registry) {
        r.register(
            "swarm_fault_tolerance",
            "Reachable managers minus quorum (-1 when the swarm cannot be asked)",
            self.swarm_fault_tolerance.clone(),
        );
        r.register(
            "swarm_raft_members",
            "Managers in the swarm's raft, as the acting controller last saw them",
            self.raft_members.clone(),
        );
        r.register(
            "swarm_raft_members_reachable",
            "Of the raft members, those reachable",
            self.raft_reachable.clone(),
        );
        r.register(
            "group_fault_tolerance",
            "Manager groups: the swarm's fault tolerance; worker groups: healthy members minus one (-1 when none)",
            self.group_fault_tolerance.clone(),
        );
        r.register(
            "group_members",
            "Owned instances by group, health and whether they run the desired config",
            self.members.clone(),
        );
        r.register(
            "group_desired_members",
            "Declared size of each group",
            self.desired.clone(),
        );
        r.register(
            "group_rollout_progress_ratio",
            "Members on the desired config over the declared size (1 when converged)",
            self.progress.clone(),
        );
        r.register(
            "group_phase",
            "1 for each group's current phase",
            self.phase.clone(),
        );
        r.register(
            "group_waiting_behind",
            "1 while the group waits behind another group (groups roll one after another) that is blocked or paused",
            self.behind.clone(),
        );
        r.register(
            "group_last_change_timestamp_seconds",
            "When this controller, acting, last saw the group's phase or member counts (declared, members, current, healthy, in flight) change, or first saw the group (Unix time)",
            self.changed.clone(),
        );
        r.register(
            "blocked_groups",
            "Groups blocked until an operator acts",
            self.blocked.clone(),
        );
    }

    /// What this controller itself does: acting or not, its engine's
    /// leader, its passes, steps and API calls.
    fn register_controller(&self, r: &mut Registry) {
        r.register(
            "controller_acting",
            "1 while this controller acts (its engine leads the swarm and it holds the store epoch)",
            self.acting.clone(),
        );
        r.register(
            "swarm_leader_known",
            "1 while this controller's own engine knows a swarm leader (a manager with quorum); every controller reports it, acting or not",
            self.leader_known.clone(),
        );
        r.register(
            "swarm_leader_seen_timestamp_seconds",
            "When this controller's own engine last knew a swarm leader (Unix time): time() minus it is how long the quorum has been lost",
            self.leader_seen.clone(),
        );
        r.register(
            "controller_last_pass_timestamp_seconds",
            "When this controller's loop last finished a pass, acting or not, whatever its outcome (Unix time): time() minus it is how long the loop has been stuck",
            self.last_pass.clone(),
        );
        r.register(
            "leadership_changes",
            "Times this controller took over as the acting controller",
            self.leadership_changes.clone(),
        );
        r.register(
            "passes",
            "Observe-plan-act passes made",
            self.passes.clone(),
        );
        r.register(
            "steps_started",
            "Side-effect steps started, by kind",
            self.steps_started.clone(),
        );
        r.register(
            "steps_failed",
            "Side-effect steps that ended in an error, by kind and by what the error says about trying again",
            self.steps_failed.clone(),
        );
        r.register(
            "api_calls",
            "Provider and engine API calls, by API and call",
            self.calls.clone(),
        );
        r.register(
            "api_errors",
            "Provider and engine API calls that failed, by API and call",
            self.call_errors.clone(),
        );
        r.register_with_unit(
            "api_call_duration",
            "Latency of provider and engine API calls",
            Unit::Seconds,
            self.call_latency.clone(),
        );
    }

    /// Every metric in the Prometheus text format (version 0.0.4), which
    /// every scraper and `promtool check metrics` read.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        prometheus_text(&out)
    }

    /// Records what one pass saw at `now_ms` (Unix ms): the plan's status
    /// and every member.
    pub(crate) fn observed(&self, plan: &Plan, members: &[MemberStatus], now_ms: u64) {
        self.passes.inc();
        let swarm_ft = plan.swarm.fault_tolerance.unwrap_or(-1);
        self.swarm_fault_tolerance.set(swarm_ft);
        self.raft_members.set(plan.swarm.members as i64);
        self.raft_reachable.set(plan.swarm.reachable as i64);
        self.group_changes(&plan.groups, now_ms as f64 / 1000.0);
        // Label sets come and go with groups and health: start afresh.
        self.members.clear();
        self.phase.clear();
        self.behind.clear();
        for m in members {
            self.members
                .get_or_create(&MemberLabels {
                    group: m.group.clone(),
                    health: m.health.clone(),
                    current: m.current.to_string(),
                })
                .inc();
        }
        let mut blocked = 0;
        for g in &plan.groups {
            let label = GroupLabel {
                group: g.name.clone(),
            };
            let ft = match g.role {
                Role::Manager => swarm_ft,
                _ => g.healthy as i64 - 1,
            };
            self.group_fault_tolerance.get_or_create(&label).set(ft);
            self.desired.get_or_create(&label).set(g.desired as i64);
            let progress = if g.desired == 0 {
                1.0
            } else {
                (g.current.min(g.desired)) as f64 / g.desired as f64
            };
            self.progress.get_or_create(&label).set(progress);
            let phase = serde_json::to_value(g.phase).unwrap_or_default();
            self.phase
                .get_or_create(&PhaseLabels {
                    group: g.name.clone(),
                    phase: phase.as_str().unwrap_or("unknown").to_string(),
                })
                .set(1);
            blocked += i64::from(g.phase == Phase::Blocked);
            if let Some(behind) = &g.behind {
                let (group, behind) = (g.name.clone(), behind.clone());
                self.behind
                    .get_or_create(&BehindLabels { group, behind })
                    .set(1);
            }
        }
        self.blocked.set(blocked);
    }

    /// Keeps each group's last-change time: carried over while its shape
    /// stays, `now` when it changed or first appears; a group no longer
    /// planned is dropped.
    fn group_changes(&self, groups: &[GroupStatus], now: f64) {
        let mut shapes = self.shapes.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = BTreeMap::new();
        for g in groups {
            let shape = GroupShape::of(g);
            let since = match shapes.remove(&g.name) {
                Some((was, since)) if was == shape => since,
                _ => now,
            };
            next.insert(g.name.clone(), (shape, since));
        }
        *shapes = next;
        self.changed.clear();
        for (group, (_, since)) in shapes.iter() {
            self.changed
                .get_or_create(&GroupLabel {
                    group: group.clone(),
                })
                .set(*since);
        }
    }

    /// The loop finished a pass at `now_ms` (Unix ms), whatever it did.
    pub(crate) fn passed(&self, now_ms: u64) {
        self.last_pass.set(now_ms as f64 / 1000.0);
    }

    /// What this controller's own engine said of the swarm this pass:
    /// whether it knows a leader, and when it last did — the very view its
    /// heartbeat publishes (one rule: [`EngineView::leader_known`]).
    pub(crate) fn engine_seen(&self, view: &EngineView) {
        self.leader_known.set(i64::from(view.leader_known()));
        if let Some(at) = view.leader_seen_ms {
            self.leader_seen.set(at as f64 / 1000.0);
        }
    }

    /// This controller acts (true) or stands by (false).
    pub(crate) fn acting(&self, acting: bool) {
        let was = self.acting.set(i64::from(acting));
        if acting && was == 0 {
            self.leadership_changes.inc();
        }
    }

    /// A side effect of `kind` started.
    pub(crate) fn step_started(&self, kind: &str) {
        self.steps_started
            .get_or_create(&StepLabels { kind: kind.into() })
            .inc();
    }

    /// A side effect of `kind` failed, as `failure` classes it.
    pub(crate) fn step_failed(&self, kind: &str, failure: Failure) {
        self.steps_failed
            .get_or_create(&FailureLabels {
                kind: kind.into(),
                class: failure.as_str(),
            })
            .inc();
    }

    /// Times `call` of `api`, counting it and, when `failed` says so, its error.
    async fn timed<T>(
        &self,
        api: &str,
        call: &str,
        f: impl Future<Output = T>,
        failed: impl FnOnce(&T) -> bool,
    ) -> T {
        let labels = CallLabels {
            api: api.into(),
            call: call.into(),
        };
        let start = Instant::now();
        let out = f.await;
        self.call_latency
            .get_or_create(&labels)
            .observe(start.elapsed().as_secs_f64());
        self.calls.get_or_create(&labels).inc();
        if failed(&out) {
            self.call_errors.get_or_create(&labels).inc();
        }
        out
    }
}

/// OpenMetrics (what the client library writes) to the Prometheus text
/// format: a counter family `x` is announced as `x_total` there, like its
/// samples, and `# UNIT` / `# EOF` lines do not exist.
fn prometheus_text(openmetrics: &str) -> String {
    let counters: Vec<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|p| {
            let rest = line.strip_prefix(p)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(&name)
                .then(|| format!("{p}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::model::SwarmView;
    use drover_core::plan::SwarmStatus;

    fn group(name: &str, role: Role, phase: Phase, current: usize) -> GroupStatus {
        GroupStatus {
            name: name.into(),
            role,
            phase,
            reason: None,
            desired_hash: "h".into(),
            desired: 4,
            members: 4,
            current,
            healthy: 3,
            in_flight: 0,
            window: None,
            behind: None,
        }
    }

    fn member(group: &str, health: &str, current: bool) -> MemberStatus {
        MemberStatus {
            id: "i".into(),
            group: group.into(),
            logical_id: None,
            node_id: None,
            role: "worker".into(),
            leader: false,
            health: health.into(),
            health_reason: None,
            current,
            created_ms: 0,
            held: false,
            boot: None,
        }
    }

    fn plan(groups: Vec<GroupStatus>) -> Plan {
        Plan {
            boot_asks: Vec::new(),
            actions: Vec::new(),
            groups,
            swarm: SwarmStatus {
                members: 3,
                reachable: 3,
                fault_tolerance: Some(1),
                leader_link: None,
                problem: None,
                ghosts: Vec::new(),
            },
            explanation: Vec::new(),
            memory: Default::default(),
            wake_at: None,
            garbage: Vec::new(),
            causes: Default::default(),
            parked: Default::default(),
        }
    }

    #[test]
    fn a_pass_is_exposed_as_gauges_by_group_health_and_currency() {
        let m = Metrics::new();
        let mut plan = plan(vec![
            group("managers", Role::Manager, Phase::Blocked, 1),
            group("workers", Role::Worker, Phase::Blocked, 4),
            group("others", Role::Worker, Phase::Rolling, 1),
        ]);
        plan.groups[2].behind = Some("managers".into());
        let members = [
            member("workers", "healthy", true),
            member("workers", "healthy", true),
            member("workers", "pending", false),
        ];
        m.observed(&plan, &members, 1_700_000_000_000);
        m.passed(1_700_000_001_500);
        m.acting(true);
        m.acting(true);
        m.step_started("provision");
        m.step_failed("provision", Failure::Transient);
        let text = m.encode();
        for line in [
            "drover_swarm_fault_tolerance 1",
            "drover_swarm_raft_members 3",
            "drover_swarm_raft_members_reachable 3",
            "drover_group_last_change_timestamp_seconds{group=\"workers\"} 1700000000.0",
            "drover_controller_last_pass_timestamp_seconds 1700000001.5",
            "drover_group_fault_tolerance{group=\"managers\"} 1",
            "drover_group_fault_tolerance{group=\"workers\"} 2",
            "drover_group_members{group=\"workers\",health=\"healthy\",current=\"true\"} 2",
            "drover_group_members{group=\"workers\",health=\"pending\",current=\"false\"} 1",
            "drover_group_rollout_progress_ratio{group=\"managers\"} 0.25",
            "drover_group_phase{group=\"workers\",phase=\"blocked\"} 1",
            "drover_group_waiting_behind{group=\"others\",behind=\"managers\"} 1",
            "drover_blocked_groups 2",
            "drover_leadership_changes_total 1",
            "drover_steps_started_total{kind=\"provision\"} 1",
            "drover_steps_failed_total{kind=\"provision\",class=\"transient\"} 1",
            "# TYPE drover_steps_failed_total counter",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}:\n{text}");
        }
        assert!(
            !text.contains("# EOF") && !text.contains("# UNIT"),
            "{text}"
        );
    }

    /// A group's last-change time stays while its phase and member counts
    /// do (a reworded reason is no change), moves when one of them changes,
    /// and goes with the group.
    #[test]
    fn a_group_s_last_change_moves_only_when_its_phase_or_counts_do() {
        let m = Metrics::new();
        let changed = |m: &Metrics, group: &str| {
            let line = format!("drover_group_last_change_timestamp_seconds{{group=\"{group}\"}} ");
            m.encode()
                .lines()
                .find_map(|l| l.strip_prefix(&line).map(str::to_string))
        };
        let workers = group("workers", Role::Worker, Phase::Rolling, 1);
        let managers = group("managers", Role::Manager, Phase::Converged, 4);
        m.observed(&plan(vec![workers.clone(), managers.clone()]), &[], 1_000);
        let mut reworded = workers.clone();
        reworded.reason = Some("1 of 4 members healthy".into());
        m.observed(&plan(vec![reworded, managers.clone()]), &[], 61_000);
        assert_eq!(changed(&m, "workers").as_deref(), Some("1.0"));
        let mut progressed = workers.clone();
        progressed.current = 2;
        m.observed(&plan(vec![progressed.clone(), managers]), &[], 121_000);
        assert_eq!(changed(&m, "workers").as_deref(), Some("121.0"));
        assert_eq!(changed(&m, "managers").as_deref(), Some("1.0"));
        m.observed(&plan(vec![progressed]), &[], 181_000);
        assert_eq!(changed(&m, "workers").as_deref(), Some("121.0"));
        assert_eq!(changed(&m, "managers"), None);
    }

    /// Every controller says whether its engine knows a leader, and when
    /// it last did: the timestamp stays at the last leader seen while the
    /// quorum is lost.
    #[test]
    fn a_lost_leader_is_a_zero_and_the_last_time_one_was_seen() {
        let m = Metrics::new();
        let led = EngineView::next(None, &SwarmView::Ok(Vec::new()), None, 1_700_000_000_000);
        m.engine_seen(&led);
        let lost = SwarmView::NoQuorum("no leader".into());
        m.engine_seen(&EngineView::next(
            Some(&led),
            &lost,
            None,
            1_700_000_060_000,
        ));
        let text = m.encode();
        for line in [
            "drover_swarm_leader_known 0",
            "drover_swarm_leader_seen_timestamp_seconds 1700000000.0",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}:\n{text}");
        }
    }
}
