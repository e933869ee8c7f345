//! The provider contract over the plugin round trip: drover's client
//! talking to drover's server (over the simulator) on a real unix socket.

mod support;

use drover_plugin::Timeouts;
use drover_plugin::testkit::{contract, plain};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contract_holds_over_drover_s_own_server() {
    let served = support::ServedSim::start();
    let client = served.client(Timeouts::default());
    contract(&client, "c-sim", |link| {
        plain("c-sim", link, "#!/bin/sh\ntrue\n")
    })
    .await;
    let socket = served.socket.clone();
    served.stop().await;
    assert!(!socket.exists(), "the server removes its socket on exit");
}
