use super::*;

fn leading(epoch: Epoch) -> (Term, Leading) {
    let mut term = Term::Following;
    let lead = term.take(epoch);
    (term, lead)
}

#[test]
fn only_a_leading_term_acts_and_only_a_held_one_writes() {
    let (mut term, lead) = leading(3);
    assert_eq!(term.acting(), Some(&lead));
    assert_eq!(term.held(), Some(&lead));
    assert_eq!(lead.epoch(), 3);

    term.hand_over(&lead, "op");
    assert_eq!(term.acting(), None, "a handing-over term acts");
    assert_eq!(
        term.held(),
        Some(&lead),
        "its finished steps' ends go unrecorded"
    );

    term.step_ended("op");
    assert_eq!(term, Term::Leading(lead.clone()));

    assert!(term.depose("fenced"));
    assert_eq!(term.acting(), None, "a deposed term acts");
    assert_eq!(term.held(), None, "a deposed term writes");
    assert_eq!(term.standing(), Standing::Deposed);
}

#[test]
fn a_handing_over_term_observes_nothing_until_its_step_ends() {
    let (mut term, lead) = leading(1);
    assert!(term.observes());
    term.hand_over(&lead, "hand-over");
    assert!(!term.observes());
    assert!(
        !term.may_campaign(Place::Manager),
        "campaigns while its engine leaves"
    );
    assert_eq!(term.standing(), Standing::HandingOver);
    term.step_ended("another step");
    assert!(!term.observes(), "another step's end ended the hand-over");
    term.step_ended("hand-over");
    assert!(term.observes());
}

#[test]
fn a_hand_over_deposed_meanwhile_ends_deposed() {
    let (mut term, lead) = leading(1);
    term.hand_over(&lead, "hand-over");
    assert!(term.depose("event write fenced"));
    assert_eq!(term.held(), None);
    assert!(!term.observes(), "the deposition cut the hand-over short");
    assert_eq!(term.deposed(), Some("event write fenced"));
    term.step_ended("hand-over");
    assert_eq!(
        term,
        Term::Deposed {
            why: "event write fenced"
        }
    );
}

#[test]
fn a_stale_proof_starts_no_hand_over() {
    let (mut term, old) = leading(1);
    term.depose("fenced");
    let new = term.take(2);
    term.hand_over(&old, "hand-over");
    assert_eq!(term, Term::Leading(new), "a former term's proof acted");
}

#[test]
fn a_deposed_controller_campaigns_again_only_on_the_cluster_or_as_an_external_one() {
    let (mut term, _) = leading(1);
    assert!(
        !term.may_campaign(Place::Manager),
        "campaigns while it leads"
    );
    term.depose("fenced");
    assert!(
        !term.may_campaign(Place::Outside),
        "off the cluster, deposed for good"
    );
    assert!(term.may_campaign(Place::Manager));
    assert!(
        term.may_campaign(Place::External),
        "an external controller stands by again (the lease says when)"
    );
    assert!(!term.stand_down(), "a deposed term held nothing");
    assert!(
        term.deposed().is_some(),
        "standing down forgot the deposition"
    );
}

#[test]
fn standing_down_gives_the_term_up_without_deposing() {
    let (mut term, _) = leading(1);
    assert!(term.stand_down());
    assert_eq!(term, Term::Following);
    assert!(term.may_campaign(Place::Outside));
}
