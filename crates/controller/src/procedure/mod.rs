//! What the shell runs beside the controller loop, from outside the
//! cluster, each with typed outcomes and errors: [`commit`] (the one way an
//! operator's change is written), [`acting`] (whether a controller
//! elsewhere acts on a commit), [`follow`] (a revision to convergence, a
//! collection until done: the one follow loop), [`bootstrap`] (the first
//! manager), [`teardown`] (the last one), [`forget`] (a group whose
//! provider is gone, on the operator's word),
//! [`recover`] (a lost manager quorum, on evidence), [`adopt`] (a swarm built by hand,
//! every write under a confirmed term) and [`store_start`] (a store process
//! started and waited for, bounded: the demo's etcd).

pub mod acting;
pub mod adopt;
pub mod bootstrap;
pub mod commit;
pub mod follow;
pub mod forget;
pub mod recover;
pub mod store_start;
pub mod teardown;
