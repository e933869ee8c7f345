use super::*;

fn no() -> Refusal {
    Refusal::ManagerOpInFlight("m-op".into())
}

#[test]
fn step_waits_render_from_their_data() {
    let cases = [
        (
            StepWait::NoLeaderToProvision,
            "waiting for the swarm to have a leader before provisioning".to_string(),
        ),
        (
            StepWait::Backoff {
                backoff: Duration::from_secs(20),
                attempt: 3,
                max: 5,
            },
            "backing off 20s before attempt 3 of 5".into(),
        ),
        (
            StepWait::Watching {
                member: "i-1",
                so_far: Duration::from_millis(4_900),
                watch: Duration::from_secs(30),
            },
            "watching i-1: healthy for 4s of 30s".into(),
        ),
        (
            StepWait::NewUnhealthy {
                member: "i-1",
                why: "node down",
            },
            "new member i-1 is unhealthy: node down".into(),
        ),
        (
            StepWait::Draining {
                node: "n1",
                tasks: 2,
            },
            "node n1 draining: 2 tasks still running".into(),
        ),
        (
            StepWait::Demote { node: "n1", no: no() },
            format!("demote of n1 waits: {}", no()),
        ),
        (
            StepWait::ManagerDemote { node: "n1", no: no() },
            format!("node n1 is a manager: its demotion waits: {}", no()),
        ),
        (
            StepWait::FormerLeaderLeave {
                node: "n0",
                bound: Duration::from_secs(60),
            },
            "waiting (at most 60s) for former leader n0 to leave".into(),
        ),
        (
            StepWait::Unlisted {
                instance: "i-9".into(),
                bound: Duration::from_secs(120),
            },
            "i-9 is not listed but was not destroyed by this operation: gone only once unlisted for 120s (a describe can be partial)".into(),
        ),
        (
            StepWait::StillManager { node: "n2" },
            "node n2 is still a manager: demote first".into(),
        ),
    ];
    for (wait, text) in cases {
        assert_eq!(wait.to_string(), text);
    }
}

#[test]
fn abandonments_render_from_their_data() {
    assert_eq!(
        Abandon::CannotAddManager(no()).to_string(),
        no().to_string()
    );
    assert_eq!(
        Abandon::SurgeMemberUnready { op: "m-1".into() }.to_string(),
        "the surge member of m-1 is not a healthy manager: the old one stays"
    );
    assert_eq!(
        Abandon::DemotionUnsafe {
            node: "n1".into(),
            no: no()
        }
        .to_string(),
        format!("demotion of n1 no longer safe: {}", no())
    );
    assert_eq!(
        Abandon::LeaderGoesLast {
            node: "n0".into(),
            other: "i-2".into()
        }
        .to_string(),
        "node n0 leads and i-2 is not current and healthy yet: the leader goes last"
    );
}
