//! A host whose engine is already part of a swarm (one this cluster does
//! not hold: the host has no enrollment of drover's) is never enrolled:
//! no record is written there, the refusal names the host and what the
//! operator must do, a pet's slot does not take another host, and cattle
//! go on to the next free host (an exhausted inventory names the refused
//! one). Lab hosts are `sshd`s of the test's own on 127.0.182.x, port
//! 2222 (`drover_ssh::testkit::Lab`); `docker` on them is a stub whose
//! `docker info` the test sets.
//!
//! Needs root (sshd) and `openssh-server` (scripts/setup.sh installs it).

use drover_core::model::tags;
use drover_spi::{InstanceProvider, ProviderError, ProvisionRequest, Unfenced};
use drover_ssh::testkit::{Lab, provider};

/// A provision for operation `link` of a worker (`logical_id`: a pet's).
fn request(props: &serde_json::Value, link: &str, logical_id: Option<&str>) -> ProvisionRequest {
    let mut r = drover_ssh::testkit::request(props, link);
    if let Some(l) = logical_id {
        r.tags.insert(tags::LOGICAL_ID.into(), l.into());
        r.logical_id = Some(l.to_string());
    }
    r
}

fn record_of(lab: &Lab, addr: &str) -> bool {
    lab.state_dir(addr)
        .join(drover_ssh::record::RECORD)
        .exists()
}

const S1: &str = "127.0.182.11";
const S2: &str = "127.0.182.12";

#[tokio::test(flavor = "multi_thread")]
async fn a_host_in_another_swarm_is_refused_naming_it_and_no_other_host_is_taken_for_its_pet() {
    let lab = Lab::new(&[S1, S2]);
    lab.in_another_swarm(S1, "active");
    let props = lab.properties(&[S1, S2]);
    let p = provider(&lab.dir.path().join("ssh"), &props);
    let pet = "127.0.182.11:2222";

    match p
        .provision(request(&props, "op-1", Some(pet)), &Unfenced)
        .await
    {
        Err(ProviderError::Permanent(m)) => {
            assert!(
                m.starts_with("host 127.0.182.11:2222 is refused: its engine is already part of a swarm (swarm state active)"),
                "{m}"
            );
            assert!(m.contains("make it leave that swarm first"), "{m}");
        }
        other => panic!("a refusal: {other:?}"),
    }
    assert!(
        !record_of(&lab, S1) && !record_of(&lab, S2),
        "no record written"
    );
    assert!(!lab.calls().contains("swarm leave"), "{}", lab.calls());

    // Cattle: the refused host is skipped, the next free one enrolled.
    let id = p
        .provision(request(&props, "op-2", None), &Unfenced)
        .await
        .unwrap();
    assert!(id.starts_with("127.0.182.12:2222-"), "{id}");
    assert!(!record_of(&lab, S1));
    // None left: the refusal names the refused host and why.
    match p.provision(request(&props, "op-3", None), &Unfenced).await {
        Err(ProviderError::Permanent(m)) => {
            assert!(
                m.starts_with("no free host in the inventory; enrolled: 127.0.182.12:2222 (group workers); refused: host 127.0.182.11:2222 is refused: its engine is already part of a swarm (swarm state active)"),
                "{m}"
            );
        }
        other => panic!("a refusal: {other:?}"),
    }
    assert!(!record_of(&lab, S1));

    // Once it left that swarm, the host is enrolled.
    lab.in_another_swarm(S1, "inactive");
    let id = p
        .provision(request(&props, "op-4", Some(pet)), &Unfenced)
        .await
        .unwrap();
    assert!(id.starts_with("127.0.182.11:2222-"), "{id}");
}

const P1: &str = "127.0.182.13";

#[tokio::test(flavor = "multi_thread")]
async fn a_host_joining_or_locked_in_another_swarm_is_refused_too() {
    let lab = Lab::new(&[P1]);
    let props = lab.properties(&[P1]);
    let p = provider(&lab.dir.path().join("ssh"), &props);
    for (i, state) in ["pending", "error", "locked"].into_iter().enumerate() {
        lab.in_another_swarm(P1, state);
        match p
            .provision(request(&props, &format!("op-{i}"), None), &Unfenced)
            .await
        {
            Err(ProviderError::Permanent(m)) => {
                assert!(m.contains(&format!("(swarm state {state})")), "{m}");
                assert!(m.contains("no free host in the inventory"), "{m}");
            }
            other => panic!("a refusal: {other:?}"),
        }
        assert!(!record_of(&lab, P1));
    }
}
