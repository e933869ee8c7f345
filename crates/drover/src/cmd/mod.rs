//! One module per command; each returns the exit code on success.

mod adopt;
mod ago;
mod apply;
mod audit;
mod commit;
mod controller;
pub mod demo;
mod destroy;
mod engine;
mod gc;
mod plan;
mod plugin;
mod progress;
mod recover;
mod revisions;
mod sim;
mod status;
mod swarm_bootstrap;
mod validate;
mod version;

use crate::cli::{Cli, Command, EngineCommand, PluginCommand, SimCommand};
use crate::error::MainError;
use std::process::ExitCode;

/// Runs the parsed command.
pub fn run(cli: Cli) -> Result<ExitCode, MainError> {
    match cli.command {
        Command::Validate { file, output } => validate::run(&file, output),
        Command::Version { output } => version::run(output),
        Command::Plan {
            file,
            sim: true,
            from,
            output,
            ..
        } => plan::run(&file, from.as_deref(), output),
        Command::Plan {
            file,
            sim: false,
            store,
            local,
            output,
            ..
        } => runtime()?.block_on(plan::live(&file, &store, &local, output)),
        Command::Sim(SimCommand::Rollout(args)) => sim::rollout(&args),
        Command::Apply(args) => runtime()?.block_on(apply::run(&args, apply::Mode::Apply)),
        Command::Bootstrap(args) => runtime()?.block_on(apply::run(&args, apply::Mode::Bootstrap)),
        Command::Adopt(args) => runtime()?.block_on(adopt::run(&args)),
        Command::Status {
            group,
            store,
            local,
            output,
        } => runtime()?.block_on(status::run(group.as_deref(), &store, &local, output)),
        Command::Controller {
            engine,
            store,
            local,
            metrics_addr,
        } => runtime()?.block_on(controller::run(&engine, &store, &local, &metrics_addr)),
        Command::Pause { group, store } => {
            runtime()?.block_on(audit::set_paused(&group, true, &store))
        }
        Command::Resume { group, store } => {
            runtime()?.block_on(audit::set_paused(&group, false, &store))
        }
        Command::Events {
            since,
            follow,
            store,
            output,
        } => runtime()?.block_on(audit::events(since, follow, &store, output)),
        Command::Hold {
            instance,
            release,
            store,
        } => runtime()?.block_on(audit::set_held(&instance, !release, &store)),
        Command::Replace {
            instance,
            skip_drain,
            store,
        } => runtime()?.block_on(audit::request_replace(&instance, skip_drain, &store)),
        Command::Rollback { group, to, store } => {
            runtime()?.block_on(revisions::rollback(&group, to, &store))
        }
        Command::Diff { from, to, store } => runtime()?.block_on(revisions::diff(from, to, &store)),
        Command::Restart { group, store } => {
            runtime()?.block_on(revisions::restart(&group, &store))
        }
        Command::Destroy {
            group,
            yes,
            timeout,
            store,
            local,
        } => runtime()?.block_on(destroy::run(&group, yes, timeout, &store, &local)),
        Command::Export { store } => runtime()?.block_on(revisions::export(&store)),
        Command::Import { file, store } => runtime()?.block_on(revisions::import(&file, &store)),
        Command::Demo(cmd) => runtime()?.block_on(demo::run(&cmd)),
        Command::History { store, output } => runtime()?.block_on(audit::history(&store, output)),
        Command::Gc(args) => runtime()?.block_on(gc::run(&args)),
        Command::Recover(args) => runtime()?.block_on(recover::run(&args)),
        Command::Engine(EngineCommand::Join {
            role,
            address,
            remote,
            engine,
        }) => runtime()?.block_on(engine::join(&role, &address, &remote, &engine)),
        Command::Plugin(PluginCommand::Serve {
            provider,
            socket,
            local,
        }) => runtime()?.block_on(plugin::serve(&provider, &socket, &local)),
        Command::Completions { shell } => {
            let mut cmd = crate::cli::command();
            clap_complete::generate(shell, &mut cmd, "drover", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// One worker thread beside the main one, whatever the machine's core
/// count: every command, the controller's loop included, waits on engines,
/// providers and stores and plans one pass at a time, and each worker
/// thread adds its own allocator heap and stack to a controller's resident
/// memory, which every manager of every cluster pays (BENCHMARKS.md §7).
fn runtime() -> Result<tokio::runtime::Runtime, MainError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| MainError::Failed(e.into()))
}
