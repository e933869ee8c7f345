//! Carrying out a plan, the part that is the same wherever it runs: which
//! journal write each action is, and that a side effect's intent is
//! journaled, under the acting term's epoch, before the effect starts.
//!
//! The controller performs these writes through its store (fenced by the
//! epoch) and starts the effects as tasks; the simulator applies them to its
//! own journal and world. Both walk a plan with one [`Execution`], so the
//! simulator checks the order of writes production makes, intents included.

use crate::journal::{Intent, Operation};
use crate::plan::Action;

/// A write to the journal, fenced by the acting term's epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalWrite {
    /// Writes this operation's record (a new one, or one with a step
    /// marked done or an intent recorded).
    Put(Box<Operation>),
    /// Removes the operation with this id: it is complete.
    Remove(String),
}

/// What carrying out one action takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Carry {
    /// This journal write, and nothing else.
    Journal(JournalWrite),
    /// A rollback of the action's group: a commit of the desired state,
    /// which the executor makes through its own revision rule.
    Rollback,
    /// The side effect, started only after `intent` (the operation's record
    /// naming the step and the epoch, when the operation is journaled) is
    /// written: a deposed controller's intent is refused and it starts
    /// nothing; the next controller judges the step from the world.
    Effect {
        /// The record to write first.
        intent: Option<Box<Operation>>,
    },
    /// Nothing: a step of the operation is already under way, or a step
    /// is marked done for an operation no longer journaled.
    Nothing,
}

/// Whether `action` is the leader's own hand-over, the last thing a walk
/// carries ([`walk_order`]): its engine is demoting itself, so anything
/// written through it afterwards (a swarm store's journal and events) would
/// ask the manager it is stopping and stretch that stop.
pub fn ends_the_walk(action: &Action) -> bool {
    matches!(
        action,
        Action::DemoteSelfAndLeave { .. } | Action::DemoteSelf { .. }
    )
}

/// `actions` in the order a walk carries them: as planned, but the
/// leader's own hand-over last ([`ends_the_walk`]), so that the plan's
/// other actions are carried while its engine still leads and none through
/// a demoting one. Everything in a plan was judged on one observation and
/// allowed side by side: only the hand-over moves.
pub fn walk_order(actions: &[Action]) -> Vec<&Action> {
    let (hand_over, rest): (Vec<&Action>, Vec<&Action>) =
        actions.iter().partition(|a| ends_the_walk(a));
    rest.into_iter().chain(hand_over).collect()
}

/// One term's walk through a plan: the journal as this term has written
/// it so far.
#[derive(Debug, Clone)]
pub struct Execution {
    journal: Vec<Operation>,
    epoch: u64,
}

impl Execution {
    /// A walk under `epoch` from the journal as the plan observed it.
    pub fn new(journal: Vec<Operation>, epoch: u64) -> Self {
        Execution { journal, epoch }
    }

    /// The journal with every write handed out so far.
    pub fn journal(&self) -> &[Operation] {
        &self.journal
    }

    /// The journal, once the walk is over.
    pub fn into_journal(self) -> Vec<Operation> {
        self.journal
    }

    /// The group of `action`'s journaled operation.
    pub fn group_of(&self, action: &Action) -> Option<&str> {
        let id = action.op_id()?;
        self.journal
            .iter()
            .find(|o| o.id == id)
            .map(|o| o.group.as_str())
    }

    /// What carrying out `action` takes; the journal here already holds its
    /// write. `running`: a side effect of the action's operation is under
    /// way (one step of an operation at a time).
    pub fn next(&mut self, action: &Action, running: bool) -> Carry {
        match action {
            Action::Begin { op } => {
                self.journal.push(op.as_ref().clone());
                Carry::Journal(JournalWrite::Put(op.clone()))
            }
            Action::MarkDone { op, step } => match self.journal.iter_mut().find(|o| o.id == *op) {
                Some(o) => {
                    o.done.insert(*step);
                    Carry::Journal(JournalWrite::Put(Box::new(o.clone())))
                }
                None => Carry::Nothing,
            },
            Action::Complete { op } => {
                self.journal.retain(|o| o.id != *op);
                Carry::Journal(JournalWrite::Remove(op.clone()))
            }
            Action::Rollback { .. } => Carry::Rollback,
            _ if running => Carry::Nothing,
            effect => {
                let id = effect.op_id().unwrap_or_default();
                let intent = match (self.journal.iter_mut().find(|o| o.id == id), effect.step()) {
                    (Some(o), Some(step)) => {
                        o.intent = Some(Intent {
                            step,
                            epoch: self.epoch,
                        });
                        Some(Box::new(o.clone()))
                    }
                    _ => None,
                };
                Carry::Effect { intent }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{OpKind, Step};
    use crate::spec::Role;

    fn op(id: &str) -> Operation {
        crate::testkit::op(id, "managers", OpKind::Roll, Role::Worker)
    }

    /// The journal-before-side-effect rule: an effect's intent, naming the
    /// step and this term's epoch, is the write handed out with it; while
    /// a step of the operation runs, nothing more is started.
    #[test]
    fn an_effect_comes_with_its_intent_under_this_epoch() {
        let mut walk = Execution::new(vec![op("op-1")], 7);
        let drain = Action::Drain {
            op: "op-1".into(),
            node: "n1".into(),
        };
        let Carry::Effect {
            intent: Some(record),
        } = walk.next(&drain, false)
        else {
            panic!("no intent written before the drain");
        };
        assert_eq!(
            record.intent,
            Some(Intent {
                step: Step::Drain,
                epoch: 7
            })
        );
        assert_eq!(walk.journal()[0], *record);
        assert_eq!(walk.next(&drain, true), Carry::Nothing);
    }

    #[test]
    fn a_walk_carries_the_leaders_own_hand_over_last_and_the_rest_as_planned() {
        let begin = |id: &str| Action::Begin {
            op: Box::new(op(id)),
        };
        let hand_over = Action::DemoteSelfAndLeave {
            op: "op-1".into(),
            node: "n1".into(),
        };
        let demote = Action::Demote {
            op: "op-3".into(),
            node: "n3".into(),
        };
        let planned = [
            begin("op-1"),
            hand_over.clone(),
            begin("op-2"),
            demote.clone(),
        ];
        let walked: Vec<&Action> = walk_order(&planned);
        assert_eq!(
            walked,
            [&begin("op-1"), &begin("op-2"), &demote, &hand_over]
        );
    }

    #[test]
    fn journal_actions_are_writes_in_order() {
        let mut walk = Execution::new(Vec::new(), 1);
        let begin = Action::Begin {
            op: Box::new(op("op-2")),
        };
        assert_eq!(
            walk.next(&begin, false),
            Carry::Journal(JournalWrite::Put(Box::new(op("op-2"))))
        );
        let done = Action::MarkDone {
            op: "op-2".into(),
            step: Step::Drain,
        };
        let Carry::Journal(JournalWrite::Put(marked)) = walk.next(&done, false) else {
            panic!("mark done is a put");
        };
        assert!(marked.done.contains(&Step::Drain));
        let complete = Action::Complete { op: "op-2".into() };
        assert_eq!(
            walk.next(&complete, false),
            Carry::Journal(JournalWrite::Remove("op-2".into()))
        );
        assert!(walk.journal().is_empty());
        assert_eq!(walk.next(&done, false), Carry::Nothing);
    }
}
