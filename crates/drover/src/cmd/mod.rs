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
mod forget;
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

/// Runs the parsed command: the ones that wait on nothing here, the rest
/// on a runtime.
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
        Command::Sim(SimCommand::Rollout(args)) => sim::rollout(&args),
        Command::Completions { shell } => {
            let mut cmd = crate::cli::command();
            clap_complete::generate(shell, &mut cmd, "drover", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        command => runtime()?.block_on(run_async(command)),
    }
}

/// Runs a command that waits on engines, providers or stores.
async fn run_async(command: Command) -> Result<ExitCode, MainError> {
    match command {
        Command::Plan {
            file,
            store,
            local,
            output,
            ..
        } => plan::live(&file, &store, &local, output).await,
        Command::Apply(args) => apply::run(&args, apply::Mode::Apply).await,
        Command::Bootstrap(args) => apply::run(&args, apply::Mode::Bootstrap).await,
        Command::Adopt(args) => adopt::run(&args).await,
        Command::Status {
            group,
            store,
            local,
            output,
        } => status::run(group.as_deref(), &store, &local, output).await,
        Command::Controller(args) => controller::run(&args).await,
        Command::Pause { group, store } => audit::set_paused(&group, true, &store).await,
        Command::Resume { group, store } => audit::set_paused(&group, false, &store).await,
        Command::Events {
            since,
            follow,
            store,
            output,
        } => audit::events(since, follow, &store, output).await,
        Command::Hold {
            instance,
            release,
            store,
        } => audit::set_held(&instance, !release, &store).await,
        Command::Replace {
            instance,
            skip_drain,
            store,
        } => audit::request_replace(&instance, skip_drain, &store).await,
        Command::Rollback { group, to, store } => revisions::rollback(&group, to, &store).await,
        Command::Diff { from, to, store } => revisions::diff(from, to, &store).await,
        Command::Restart { group, store } => revisions::restart(&group, &store).await,
        Command::Destroy {
            group,
            yes,
            forget_machines,
            timeout,
            store,
            local,
        } => destroy::run(&group, (yes, forget_machines), timeout, &store, &local).await,
        Command::Export { store } => revisions::export(&store).await,
        Command::Import { file, store } => revisions::import(&file, &store).await,
        Command::Demo(cmd) => demo::run(&cmd).await,
        Command::History { store, output } => audit::history(&store, output).await,
        Command::Gc(args) => gc::run(&args).await,
        Command::Recover(args) => recover::run(&args).await,
        Command::Engine(EngineCommand::Join {
            role,
            address,
            remote,
            engine,
        }) => engine::join(&role, &address, &remote, &engine).await,
        Command::Plugin(PluginCommand::Serve {
            provider,
            socket,
            local,
        }) => plugin::serve(&provider, &socket, &local).await,
        Command::Validate { .. }
        | Command::Version { .. }
        | Command::Sim(_)
        | Command::Completions { .. } => unreachable!("run runs it without a runtime"),
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
