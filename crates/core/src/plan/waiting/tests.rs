use super::*;
use crate::plan::tests::node;

#[test]
fn an_unlisted_node_is_named_by_its_state_and_link() {
    let live = node("w1", false, false);
    let link = live.link.clone().expect("a test node carries a link");
    assert_eq!(
        Waiting::Unlisted(Unlisted::of(&live)).to_string(),
        format!(
            "node {} (link {link}) is live but no listed machine carries its link: the describe may be incomplete, so no machine is added until that node is matched or Down",
            live.id
        )
    );
    let down = Node {
        state: NodeState::Down,
        ..live.clone()
    };
    assert!(
        Unlisted::of(&down)
            .to_string()
            .contains("is Down and no listed machine carries its link"),
    );
    let unlabelled = Node {
        link: None,
        ..live.clone()
    };
    assert_eq!(
        Waiting::HealAfterUnlisted {
            member: "i-1".into(),
            node: Unlisted::of(&unlabelled),
        }
        .to_string(),
        format!(
            "cannot heal i-1 yet: raft member {id} carries no drover.link label (its engine lost drover's labels?): it may be the member of the empty slot, so no manager is added until its labels are back or it is demoted (docker node demote {id}; a dead cattle member also once it is Down)",
            id = live.id
        )
    );
}

#[test]
fn waits_render_from_their_data() {
    let no = Refusal::ManagerOpInFlight("m-1".into());
    let cases = [
        (
            Waiting::InFlight {
                in_flight: 2,
                canaries: true,
                limit: 1,
            },
            "2 in flight (canaries = 1)".to_string(),
        ),
        (
            Waiting::InFlight {
                in_flight: 3,
                canaries: false,
                limit: 3,
            },
            "3 in flight (max_in_flight = 3)".into(),
        ),
        (
            Waiting::Manager {
                member: "i-1".into(),
                no: no.clone(),
            },
            format!("manager i-1 waits: {no}"),
        ),
        (
            Waiting::Held(vec!["i-1".into(), "i-2".into()]),
            "held by an operator: i-1, i-2".into(),
        ),
        (
            Waiting::EmptySlot {
                slot: "db-1".into(),
                bound: Duration::from_secs(120),
            },
            "slot db-1 reads empty: filled once it has for 120s (a describe can be partial)".into(),
        ),
        (
            Waiting::LastManager {
                member: "i-1".into(),
                group: "managers".into(),
            },
            "i-1 is the swarm's last manager: `drover destroy managers` removes it from outside the swarm".into(),
        ),
        (
            Waiting::OverSize(2),
            "2 member(s) over the declared size: retired before the roll adds another".into(),
        ),
        (
            Waiting::Op {
                op: "w-1".into(),
                why: OpWait::Undescribed("timeout".into()),
            },
            "operation w-1 waits: provider describe failed: timeout".into(),
        ),
    ];
    for (wait, text) in cases {
        assert_eq!(wait.to_string(), text);
    }
    let why = budget::Wait::ServicesUnknown {
        node: "n1".into(),
        tasks: 1,
        error: "e".into(),
    };
    assert_eq!(
        Waiting::Budget {
            member: "i-3".into(),
            why: why.clone(),
        }
        .to_string(),
        format!("i-3 waits: {why}")
    );
    assert_eq!(
        Waiting::Op {
            op: "w-2".into(),
            why: OpWait::Hold(why.clone()),
        }
        .to_string(),
        format!("w-2: {why}")
    );
}
