//! One rule per question the safety contract asks of the world, each a pure
//! function of typed evidence that returns a typed verdict carrying what an
//! operator reads: [`machine`] ("is this machine gone?") and [`quorum`]
//! ("is the managers' quorum lost?"). Every place that needs an answer
//! (status, recover, the heartbeats, the planner) asks these, so the
//! answer cannot differ between them.

pub mod machine;
pub mod quorum;
