//! A roll of instant machines never idles (issue 37): the loop's spin
//! guard — a pause of one resync after 20 passes in a row — counts only
//! passes with no step ending meanwhile. A roll one at a time is two
//! passes per member with a step ending between each; before, its 21st
//! pass slept a whole resync (a roll of 10 took 0.32 s, 0.25 s of it that
//! sleep).

mod support;

use drover_controller::Controller;
use drover_core::spec::parse_str;
use drover_sim::{SimCloud, Timings, World};
use drover_spi::Store;
use std::time::Duration;
use support::{Running, seeded_store, sim_context, who};

const SPEC: &str = "groups:
- name: plain
  role: plain
  allocation: {size: 15}
  instance: {provider: sim, properties: {image: v1}}
  update: {max_in_flight: 1, canaries: 0, watch: 0s}
";

/// Virtual time until the newest revision is converged.
async fn converged(store: &dyn Store) -> Duration {
    let t0 = tokio::time::Instant::now();
    loop {
        let history = store.history().await.unwrap();
        if history.last().is_some_and(|r| r.converged) {
            return t0.elapsed();
        }
        assert!(t0.elapsed() < Duration::from_secs(600), "never converged");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_roll_of_instant_machines_never_waits_a_resync() {
    let cloud = SimCloud::new(World::new(3, Timings::instant()));
    let store = seeded_store(SPEC).await;
    let mut ctx = sim_context(&cloud, store.clone());
    let resync = Duration::from_secs(10);
    ctx.resync = resync;
    let running = Running::start(Controller::new(ctx));
    converged(&*store).await;
    let v2 = parse_str(&SPEC.replace("image: v1", "image: v2"))
        .spec
        .expect("valid spec");
    store.commit(1, &v2, who(), false).await.unwrap();
    let took = converged(&*store).await;
    running.stop().await;
    assert!(
        took < resync,
        "the roll of 15 instant machines took {took:?}: it slept a resync"
    );
}
