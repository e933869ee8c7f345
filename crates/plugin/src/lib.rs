//! # drover-plugin
//!
//! Machines from anywhere, over InfraKit's instance plugin protocol:
//! JSON-RPC 2.0 over HTTP `POST /` on a unix socket, Go-style field names.
//!
//! ## Layout
//! - [`wire`]: the request and response shapes, one set for both ends;
//! - [`discovery`]: where a plugin's socket is (`INFRAKIT_PLUGINS_DIR`...);
//! - [`client`]: [`PluginProvider`], an `InstanceProvider` over a plugin
//!   (handshake with fallback, per-call time bounds, "maybe done"), and
//!   [`PluginError`], how its calls fail;
//! - [`server`]: any `InstanceProvider` served as a plugin
//!   (`drover plugin serve`), with [`info`], its `GET /info/api.json`.
//!
//! ## Start here
//! `docs/plugins.md` is the protocol as drover speaks it, with the rules a
//! plugin author keeps (idempotence on the link tag, secrets).

// Production functions stay short enough to read at once (clippy.toml:
// 80 lines); tests may be long scenarios.
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

pub mod client;
pub mod discovery;
mod error;
pub mod info;
mod rpc;
pub mod server;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod wire;

pub use client::{ADDRESS_PLACEHOLDER, Agreed, Api, PluginError, PluginProvider, Timeouts};
