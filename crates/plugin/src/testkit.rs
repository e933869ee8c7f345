//! The provider contract, for this crate's tests and the end-to-end
//! suites (never part of a production build): what every
//! [`InstanceProvider`] keeps, run against any of them — provisioning is
//! idempotent on the link (also when two calls race), describe filters by
//! tags and lists what was made, labels are found again, destroy is
//! idempotent, a refused fence does nothing.

use drover_core::model::tags;
use drover_core::template::BootContext;
use drover_spi::{
    Fence, InstanceProvider, LeaseExpired, ProviderError, ProvisionRequest, Unfenced,
};
use std::collections::BTreeMap;

/// A lease that ran out.
pub struct Expired;

impl Fence for Expired {
    fn check(&self) -> Result<(), LeaseExpired> {
        Err(LeaseExpired("expired in the test".into()))
    }
}

/// A request for a plain machine of `cluster`'s group `g` with `link`.
pub fn plain(cluster: &str, link: &str, script: &str) -> ProvisionRequest {
    let tags: BTreeMap<String, String> = [
        (tags::CLUSTER, cluster),
        (tags::GROUP, "g"),
        (tags::LINK, link),
        (tags::CONFIG, "h1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let mut ctx = BootContext::example(drover_core::spec::Role::Plain);
    ctx.cluster_id = cluster.into();
    ctx.group = "g".into();
    ctx.link = link.into();
    ctx.logical_id = String::new();
    ctx.address = String::new();
    ProvisionRequest {
        tags: tags.clone(),
        logical_id: None,
        properties: serde_json::json!({"size": "s"}),
        engine_labels: tags,
        boot_template: script.into(),
        boot_context: ctx,
        boot_env: Vec::new(),
    }
}

fn filter(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Runs the contract on `p`; `req(link)` makes the requests (each test
/// uses its own cluster id, which the requests must carry as `cluster`).
pub async fn contract(
    p: &dyn InstanceProvider,
    cluster: &str,
    req: impl Fn(&str) -> ProvisionRequest,
) {
    let ours = filter(&[(tags::CLUSTER, cluster)]);
    assert!(
        p.describe(&ours).await.unwrap().is_empty(),
        "a fresh provider lists nothing"
    );

    // Provision, found by its link with every tag it was given.
    let first = req("link-1");
    let id = p.provision(first.clone(), &Unfenced).await.unwrap();
    let listed = p
        .describe(&filter(&[(tags::LINK, "link-1")]))
        .await
        .unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].id, id);
    for (k, v) in &first.tags {
        assert_eq!(listed[0].tag(k), Some(v.as_str()), "tag {k}");
    }
    assert!(listed[0].running);

    // Idempotent on the link: again, and two racing calls.
    assert_eq!(p.provision(req("link-1"), &Unfenced).await.unwrap(), id);
    let (a, b) = tokio::join!(
        p.provision(req("link-2"), &Unfenced),
        p.provision(req("link-2"), &Unfenced)
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a, b, "one operation, one machine");
    assert_eq!(p.describe(&ours).await.unwrap().len(), 2);

    // Labels are found again; a filter nothing matches lists nothing.
    p.label(&id, &filter(&[("x", "y")]), &Unfenced)
        .await
        .unwrap();
    let by_label = p
        .describe(&filter(&[(tags::CLUSTER, cluster), ("x", "y")]))
        .await
        .unwrap();
    assert_eq!(
        by_label.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        [id.as_str()]
    );
    assert!(
        p.describe(&filter(&[(tags::CLUSTER, cluster), ("x", "z")]))
            .await
            .unwrap()
            .is_empty()
    );

    // A refused fence does nothing.
    let refused = p.provision(req("link-3"), &Expired).await;
    assert!(
        matches!(refused, Err(ProviderError::Fenced(_))),
        "{refused:?}"
    );
    let refused = p.destroy_fenced(&a, &Expired).await;
    assert!(
        matches!(refused, Err(ProviderError::Fenced(_))),
        "{refused:?}"
    );
    assert_eq!(p.describe(&ours).await.unwrap().len(), 2);

    // Destroy, idempotent.
    p.destroy(&id).await.unwrap();
    assert!(
        p.describe(&filter(&[(tags::LINK, "link-1")]))
            .await
            .unwrap()
            .is_empty()
    );
    p.destroy(&id).await.unwrap();
    p.destroy(&a).await.unwrap();
    assert!(p.describe(&ours).await.unwrap().is_empty());
}
