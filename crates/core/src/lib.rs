//! # drover-core
//!
//! The pure heart of drover: what the operator declared ([`spec`]), what a
//! member was built from ([`hash`]), the quorum arithmetic ([`quorum`]), the
//! write-ahead [`journal`] of multi-step operations, and the [`plan`]ner that
//! decides the next safe steps.
//!
//! No I/O, no async, no clock, no randomness: time and a nonce are inputs,
//! so every decision can be replayed, golden-tested and property-tested.
//!
//! ## Start here
//! 1. [`spec::load_bytes`] reads a cluster file into a
//!    resolved [`spec::ClusterSpec`] or a list of [`spec::Diagnostic`]s, and
//!    [`spec::validate_commit`] is the one rule for what may be committed.
//! 2. The shell observes providers and the swarm into a [`model::Observed`].
//! 3. [`plan::plan`] returns a [`plan::Plan`]: journal writes and side effects
//!    in order, status, explanation, and when to wake up next.

// Production functions stay short enough to read at once (clippy.toml:
// 80 lines); tests may be long scenarios.
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

pub mod boot;
pub mod budget;
pub mod control;
pub mod execute;
pub mod forget;
pub mod hash;
pub mod in_place;
pub mod join_token;
pub mod journal;
pub mod model;
pub mod own_engine;
pub mod plan;
pub mod quorum;
pub mod quorum_probe;
pub mod recover;
pub mod redact;
pub mod retire;
pub mod revision;
pub mod spec;
pub mod teardown;
pub mod template;
#[cfg(test)]
pub(crate) mod testkit;
pub mod verdict;
pub mod yaml;
