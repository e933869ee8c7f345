//! What the shell runs beside the controller loop, from outside the
//! cluster, each with typed outcomes and errors: [`commit`] (the one way an
//! operator's change is written), [`follow`] (a revision to convergence),
//! [`bootstrap`] (the first manager) and [`teardown`] (the last one).

pub mod adopt;
pub mod bootstrap;
pub mod commit;
pub mod follow;
pub mod store_start;
pub mod teardown;
