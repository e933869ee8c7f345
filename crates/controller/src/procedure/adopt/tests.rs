use super::*;
use drover_core::model::{Availability, Instance, NodeState, RaftMember};
use drover_spi::{ProvisionRequest, Store};
use drover_store::MemStore;
use std::sync::Mutex;

/// Machines drover did not make, each engine naming node `n-<machine>`;
/// what it adopted is remembered.
#[derive(Default)]
struct Hand {
    adopted: Mutex<Vec<(String, BTreeMap<String, String>)>>,
}

#[async_trait]
impl InstanceProvider for Hand {
    async fn provision(&self, _: ProvisionRequest, _: &dyn Fence) -> Result<String, ProviderError> {
        Err(ProviderError::Permanent(
            "adoption provisions nothing".into(),
        ))
    }
    async fn destroy_fenced(&self, _: &str, _: &dyn Fence) -> Result<(), ProviderError> {
        Err(ProviderError::Permanent("adoption destroys nothing".into()))
    }
    async fn describe(&self, _: &BTreeMap<String, String>) -> Result<Vec<Instance>, ProviderError> {
        Ok(Vec::new())
    }
    async fn label(
        &self,
        _: &str,
        _: &BTreeMap<String, String>,
        _: &dyn Fence,
    ) -> Result<(), ProviderError> {
        Ok(())
    }
    async fn inspect_foreign(&self, reference: &str) -> Result<Foreign, ProviderError> {
        Ok(Foreign {
            reference: reference.to_string(),
            node_id: Some(format!("n-{reference}")),
            address: None,
            adopted_as: None,
        })
    }
    async fn adopt(
        &self,
        reference: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<String, ProviderError> {
        self.adopted
            .lock()
            .unwrap()
            .push((reference.to_string(), tags.clone()));
        Ok(format!("i-{reference}"))
    }
}

/// The swarm's node updates, as an engine makes them: the fence is checked
/// right before one is sent.
#[derive(Default)]
struct Swarm {
    labelled: Mutex<Vec<(String, BTreeMap<String, String>)>>,
}

#[async_trait]
impl NodeLabels for Swarm {
    async fn label_node(
        &self,
        node: &str,
        labels: &BTreeMap<String, String>,
        fence: &dyn Fence,
    ) -> Result<(), ClusterError> {
        fence.check()?;
        self.labelled
            .lock()
            .unwrap()
            .push((node.to_string(), labels.clone()));
        Ok(())
    }
}

fn node(id: &str, manager: bool) -> Node {
    Node {
        id: id.to_string(),
        link: None,
        cluster: None,
        group: None,
        state: NodeState::Ready,
        availability: Availability::Active,
        manager_role: manager,
        raft: manager.then(|| RaftMember {
            leader: true,
            reachable: true,
            addr: "127.0.0.1:2377".into(),
        }),
        running_tasks: 0,
        locked: false,
        left: false,
        engine_no_manager: false,
        engine_version: None,
    }
}

fn spec() -> ClusterSpec {
    drover_core::spec::parse_str(
        "groups:\n\
         - name: managers\n  role: manager\n  allocation: {size: 1}\n  instance: {provider: local}\n  update: {strategy: surge}\n\
         - name: workers\n  role: worker\n  allocation: {size: 2}\n  instance: {provider: local}\n",
    )
    .spec
    .expect("test spec")
}

fn named(machines: &[&str]) -> Vec<Named> {
    machines
        .iter()
        .map(|m| Named {
            node: None,
            machine: m.to_string(),
        })
        .collect()
}

struct Lab {
    store: Arc<dyn Store>,
    hand: Hand,
    swarm: Swarm,
    nodes: Vec<Node>,
}

impl Lab {
    async fn new() -> Self {
        let store: Arc<dyn Store> = Arc::new(MemStore::default());
        store.init_cluster("c1").await.unwrap();
        Lab {
            store,
            hand: Hand::default(),
            swarm: Swarm::default(),
            nodes: vec![node("n-m1", true), node("n-w1", false), node("n-w2", false)],
        }
    }

    async fn adopt(&self, epoch: Epoch) -> Result<Adopted, AdoptError> {
        let spec = spec();
        let matches = matches(
            &spec,
            &named(&["m1", "w1"]),
            None,
            &self.nodes,
            &self.hand,
            self.store.as_ref(),
        )
        .await?;
        let change = change(self.store.as_ref(), &spec).await?;
        let adoption = Adoption { matches, change };
        carry_out(
            &adoption,
            &spec,
            "c1",
            Writer {
                store: self.store.clone(),
                epoch,
                who: "tester",
            },
            &self.swarm,
            &self.hand,
            |_, _| {},
        )
        .await
    }
}

#[tokio::test]
async fn an_adoption_labels_the_nodes_adopts_the_machines_then_commits() {
    let lab = Lab::new().await;
    let epoch = lab.store.campaign(IDENTITY).await.unwrap();
    let adopted = lab.adopt(epoch).await.expect("adopted");
    assert_eq!(
        adopted.instances,
        vec![
            ("n-m1".into(), "i-m1".into(), "managers".into()),
            ("n-w1".into(), "i-w1".into(), "workers".into()),
        ]
    );
    assert_eq!(adopted.revision, Some(1));
    let labelled = lab.swarm.labelled.lock().unwrap().clone();
    let machines = lab.hand.adopted.lock().unwrap().clone();
    assert_eq!(labelled.len(), 2);
    for ((node, labels), (machine, tags)) in labelled.iter().zip(&machines) {
        assert_eq!(node, &format!("n-{machine}"));
        // The node and its instance share the link: the only join of the two.
        assert_eq!(labels.get(tags::LINK), tags.get(tags::LINK));
        assert_eq!(labels.get(tags::CLUSTER).map(String::as_str), Some("c1"));
        assert!(tags.contains_key(tags::ADOPTED));
    }
    let desired = lab.store.desired().await.unwrap().expect("committed");
    assert_eq!(desired.spec, spec());
    assert_eq!(desired.provenance.who, "tester");
}

#[tokio::test]
async fn a_deposed_adoption_labels_no_node_adopts_no_machine_and_commits_nothing() {
    let lab = Lab::new().await;
    let epoch = lab.store.campaign(IDENTITY).await.unwrap();
    // A controller campaigns after the adoption took its term.
    lab.store.campaign("controller on m1").await.unwrap();
    let e = lab
        .adopt(epoch)
        .await
        .expect_err("a deposed adoption wrote");
    assert!(e.is_deposed(), "{e}");
    assert!(!e.is_bad_input(), "{e}");
    assert!(
        lab.swarm.labelled.lock().unwrap().is_empty(),
        "a node was labelled"
    );
    assert!(
        lab.hand.adopted.lock().unwrap().is_empty(),
        "a machine was adopted"
    );
    assert!(
        lab.store.desired().await.unwrap().is_none(),
        "a spec was committed"
    );
}

#[tokio::test]
async fn a_refusal_comes_before_any_write_and_says_what_to_give() {
    let lab = Lab::new().await;
    let spec = spec();
    let with_map = |node: &str| {
        vec![Named {
            node: Some(node.to_string()),
            machine: "w1".into(),
        }]
    };
    let refusal = |named: Vec<Named>| {
        let (spec, nodes, hand, store) = (&spec, &lab.nodes, &lab.hand, lab.store.as_ref());
        async move {
            matches(spec, &named, None, nodes, hand, store)
                .await
                .expect_err("refused")
                .to_string()
        }
    };
    assert_eq!(
        refusal(with_map("n-w")).await,
        "--map n-w=w1: n-w names 2 nodes: give more of the id"
    );
    assert_eq!(
        refusal(with_map("x")).await,
        "--map x=w1: no node x in the swarm"
    );
    assert_eq!(
        refusal(named(&["w1", "w2", "w3"])).await,
        "machine w3: its engine is node n-w3, which is not in the swarm seen through --engine"
    );
    assert_eq!(
        refusal(named(&[])).await,
        "name the machines to adopt with --machine MACHINE (or --map NODE=MACHINE)"
    );
    assert!(lab.store.desired().await.unwrap().is_none());
}
