//! Hook steps ([`crate::spec::hooks`]): only the journal says one ran.

use super::Action;
use super::blocked::Blocked;
use super::group::Planner;
use super::memory::Timer;
use super::op::{StepOf, StepState};
use crate::spec::hooks::{HOOK_RETRY, HookOnFailure};
use crate::spec::{HookFacts, HookPoint};

impl<'a> Planner<'a> {
    /// A hook step: done once the journal records it (the controller marks
    /// it when the call succeeded, or failed with `on_failure: continue`);
    /// otherwise its call. After a blocking hook's failure the group is
    /// blocked with the hook's own message, and the hook is called again
    /// after [`HOOK_RETRY`].
    pub(super) fn hook<'o>(&mut self, s: StepOf<'_, 'o, 'a>) -> StepState<'o> {
        let StepOf { op, step, view, .. } = s;
        let point = step.hook();
        let hook = point.and_then(|p| view.d.spec.hooks.at(p));
        let (Some(point), Some(hook)) = (point, hook) else {
            return StepState::Done;
        };
        if op.done.contains(&step) {
            return StepState::Done;
        }
        if let Some(f) = op.hook_failure.as_ref().filter(|f| f.step == step)
            && hook.on_failure == HookOnFailure::Block
            && !self
                .clock
                .elapsed(Timer::HookRetry(op.id.clone(), f.attempts), HOOK_RETRY)
        {
            return StepState::Fail(Blocked::HookFailed {
                point,
                op: op.id.clone(),
                attempts: f.attempts,
                message: f.message.clone(),
                retry: HOOK_RETRY,
            });
        }
        // Leaving: the victim; arriving: the machine the op made.
        let post = matches!(point, HookPoint::PostProvision | HookPoint::PostJoin);
        let (instance, logical_id, node) = if post {
            let inst = s.replacement;
            let node = inst.and_then(|i| self.facts.world.node_for(i.link()));
            (
                inst.map(|i| i.id.clone()),
                op.target.as_ref().and_then(|t| t.logical_id.clone()),
                node.map(|n| n.id.clone()),
            )
        } else {
            let v = op.victim.as_ref();
            (
                v.and_then(|v| v.instance.clone()),
                v.and_then(|v| v.logical_id.clone()),
                s.node
                    .map(|n| n.id.clone())
                    .or_else(|| v.and_then(|v| v.node.clone())),
            )
        };
        StepState::Act(Action::RunHook {
            op: op.id.clone(),
            step,
            hook: Box::new(hook.clone()),
            facts: Box::new(HookFacts {
                hook: point,
                idempotency_key: HookFacts::key(&op.id, point),
                operation: op.id.clone(),
                cluster: self.facts.input.desired.cluster_id.clone(),
                group: op.group.clone(),
                instance,
                logical_id,
                node,
            }),
        })
    }
}
