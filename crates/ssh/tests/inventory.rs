//! The inventories the provider asks, read from a cluster's store: the
//! desired revision's hosts and those only earlier revisions name (a host
//! taken out of the inventory while enrolled is still found and returned),
//! read again only when the desired revision changes.

use drover_core::spec::load_bytes;
use drover_spi::{Provenance, Store};
use drover_ssh::{Inventory, StoreInventory};
use drover_store::MemStore;
use std::sync::Arc;

fn spec(hosts: &str) -> drover_core::spec::ClusterSpec {
    let text = format!(
        "groups:\n- name: workers\n  role: worker\n  allocation: {{size: 1}}\n  instance:\n    provider: ssh\n    properties: {{hosts: {hosts}, identity_agent: SSH_AUTH_SOCK, known_hosts: /k}}\n"
    );
    load_bytes(text.as_bytes()).spec.expect("a valid spec")
}

fn who() -> Provenance {
    Provenance {
        who: "test".into(),
        at_ms: 0,
        message: String::new(),
    }
}

#[tokio::test]
async fn the_inventory_is_the_desired_revisions_and_the_hosts_only_earlier_ones_name() {
    let store = Arc::new(MemStore::default());
    let inventory = StoreInventory::new(store.clone());
    let declared = inventory.declared().await.unwrap();
    assert!(declared.targets().is_empty(), "no revision: no host");

    store.init_cluster("c1").await.unwrap();
    store
        .commit(0, &spec("[10.0.1.11, 10.0.1.12]"), who(), false)
        .await
        .unwrap();
    store
        .commit(1, &spec("[10.0.1.12, 10.0.1.13]"), who(), false)
        .await
        .unwrap();
    let targets = inventory.declared().await.unwrap().targets();
    let seen: Vec<(String, bool)> = targets.iter().map(|t| (t.name(), t.current)).collect();
    assert_eq!(
        seen,
        [
            ("10.0.1.12".to_string(), true),
            ("10.0.1.13".to_string(), true),
            ("10.0.1.11".to_string(), false),
        ]
    );
    store
        .commit(2, &spec("[10.0.1.14]"), who(), false)
        .await
        .unwrap();
    let names: Vec<String> = inventory
        .declared()
        .await
        .unwrap()
        .targets()
        .iter()
        .map(|t| t.name())
        .collect();
    assert_eq!(names, ["10.0.1.14", "10.0.1.12", "10.0.1.13", "10.0.1.11"]);
}
