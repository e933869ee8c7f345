//! What the shell runs beside the controller loop, from outside the
//! cluster, each with typed outcomes and errors: [`commit`] (the one way an
//! operator's change is written), [`follow`] (a revision to convergence),
//! [`bootstrap`] (the first manager), [`teardown`] (the last one) and
//! [`recover`] (a lost manager quorum, on evidence).

pub mod bootstrap;
pub mod commit;
pub mod follow;
pub mod recover;
pub mod teardown;
