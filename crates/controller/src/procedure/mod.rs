//! What the shell runs beside the controller loop, from outside the
//! cluster, each with typed outcomes and errors: [`commit`] (the one way an
//! operator's change is written), [`follow`] (a revision to convergence),
//! [`bootstrap`] (the first manager), [`teardown`] (the last one),
//! [`recover`] (a lost manager quorum, on evidence), [`adopt`] (machines
//! drover did not build) and [`store_start`] (the demo's etcd).

pub mod adopt;
pub mod bootstrap;
pub mod commit;
pub mod follow;
pub mod recover;
pub mod store_start;
pub mod teardown;
