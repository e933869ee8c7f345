//! The ec2 provider against a real EC2 API: moto on loopback, checking
//! every signature, and the test kit's fault-injecting proxy in front of
//! it for what moto does not do (throttling, eventual consistency, lost
//! answers, `ClientToken` idempotency). Each test has its own moto,
//! killed by PID when the test ends, also when it fails.

use drover_core::model::tags;
use drover_core::spec::Role;
use drover_core::template::BootContext;
use drover_ec2::testkit::{AMI, Faults, Moto, Proxy, REGION};
use drover_ec2::throttle::{Rate, Rates};
use drover_ec2::{Ec2Provider, api::Credentials};
use drover_spi::{
    InstanceProvider, ProviderCall, ProviderError, ProvisionRequest, Secret, Unfenced,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

const SCRIPT: &str = "#!/bin/sh\necho booted {{ address }} {{ join_addr }}\n";

async fn request(
    moto: &Moto,
    cluster: &str,
    link: &str,
    logical_id: Option<&str>,
) -> ProvisionRequest {
    let subnets = moto.subnets().await;
    let tags = BTreeMap::from([
        (tags::CLUSTER.to_string(), cluster.to_string()),
        (tags::GROUP.to_string(), "g".to_string()),
        (tags::LINK.to_string(), link.to_string()),
        (tags::ZONE.to_string(), "us-east-1a".to_string()),
    ]);
    ProvisionRequest {
        tags,
        logical_id: logical_id.map(str::to_string),
        properties: json!({"region": REGION, "image_id": AMI, "instance_type": "t3.micro",
            "subnets": {"us-east-1a": subnets["us-east-1a"]}}),
        engine_labels: BTreeMap::new(),
        boot_template: SCRIPT.into(),
        boot_context: BootContext::example(Role::Worker),
        boot_env: Vec::new(),
    }
}

fn cluster_tag(cluster: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(tags::CLUSTER.to_string(), cluster.to_string())])
}

/// An instance's boot log is its console output (`GetConsoleOutput`,
/// signed like every call): moto answers with a fixed sample, base64; the
/// provider hands back its lines. An unknown instance is said so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_boot_log_is_the_instances_console_output() {
    let moto = Moto::start().await;
    let p = moto.provider();
    let req = request(&moto, "c1", "op-console", None).await;
    let id = p.provision(req, &Unfenced).await.unwrap();
    let log = p.boot_log(&id).await.unwrap().expect("console output");
    let lines = log.lines();
    assert_eq!(lines.len(), 10, "{lines:?}");
    assert!(
        lines[0].starts_with("Linux version 2.6.16-xenU"),
        "{lines:?}"
    );
    assert_eq!(lines[9], "Enabling fast FPU save and restore... done.");
    let unknown = p.boot_log("i-0123456789abcdef0").await;
    assert!(
        matches!(unknown, Err(ProviderError::NotFound(_))),
        "{unknown:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provision_describe_label_destroy_with_signatures_checked() {
    let moto = Moto::start().await;
    let p = moto.provider();
    let req = request(&moto, "c1", "op-1", Some("172.31.0.50")).await;
    let id = p.provision(req.clone(), &Unfenced).await.unwrap();
    assert!(id.starts_with("i-"), "{id}");
    // Tagged at launch: the instance and its volume carry every drover tag.
    let listed = p.describe(&cluster_tag("c1")).await.unwrap();
    assert_eq!(listed.len(), 1);
    let i = &listed[0];
    assert_eq!(i.id, id);
    assert!(i.running && i.created_ms > 0);
    for (k, v) in &req.tags {
        assert_eq!(i.tag(k), Some(v.as_str()), "{k}");
    }
    let volumes = moto
        .ec2()
        .call(
            "DescribeVolumes",
            &[
                ("Filter.1.Name".into(), "tag:drover.link".into()),
                ("Filter.1.Value.1".into(), "op-1".into()),
            ],
        )
        .await
        .unwrap();
    assert!(volumes.contains("<volumeId>vol-"), "{volumes}");
    let user_data = moto
        .ec2()
        .call(
            "DescribeInstanceAttribute",
            &[
                ("InstanceId".into(), id.clone()),
                ("Attribute".into(), "userData".into()),
            ],
        )
        .await
        .unwrap();
    assert!(user_data.contains("<value>"), "{user_data}");
    // Another cluster's describe does not see it; labels are added.
    assert!(p.describe(&cluster_tag("c2")).await.unwrap().is_empty());
    let labels = BTreeMap::from([("drover.node".to_string(), "n1".to_string())]);
    p.label(&id, &labels, &Unfenced).await.unwrap();
    let listed = p.describe(&cluster_tag("c1")).await.unwrap();
    assert_eq!(listed[0].tag("drover.node"), Some("n1"));
    // Destroyed: gone from describes (terminated is not live); again: success.
    p.destroy(&id).await.unwrap();
    assert!(p.describe(&cluster_tag("c1")).await.unwrap().is_empty());
    p.destroy(&id).await.unwrap();
    assert_eq!(
        moto.states().await,
        BTreeMap::from([("terminated".to_string(), 1)])
    );
    // moto checks signatures: a wrong secret is refused, and permanently.
    let mut settings = moto.settings(&moto.endpoint);
    settings.credentials = Credentials::Static {
        access_key: "AKIDWRONG".into(),
        secret_key: "wrong".into(),
    };
    let e = Ec2Provider::new(settings)
        .describe(&cluster_tag("c1"))
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::Permanent(_)), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_before_any_call_and_no_secret_is_shown() {
    let moto = Moto::start().await;
    let proxy = Proxy::start(&moto).await;
    let p = Ec2Provider::new(moto.settings(&proxy.endpoint));
    let secret = "hunter2-never-in-user-data";
    let mut req = request(&moto, "c1", "op-1", None).await;
    req.boot_env = vec![(
        "DROVER_ETCD_PASSWORD".into(),
        Secret::new(secret.to_string()),
    )];
    let e = p
        .provision(req.clone(), &Unfenced)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("DROVER_ETCD_PASSWORD") && e.contains("\"g\""),
        "{e}"
    );
    assert!(!e.contains(secret), "{e}");
    req.boot_env.clear();
    req.boot_template = format!("#!/bin/sh\n# {}\n", "x".repeat(16 * 1024));
    let e = p.provision(req.clone(), &Unfenced).await.unwrap_err();
    assert!(matches!(e, ProviderError::Permanent(_)), "{e}");
    assert!(
        e.to_string().contains("group \"g\"") && e.to_string().contains("16384"),
        "{e}"
    );
    req.boot_template = SCRIPT.into();
    let base = req.properties.clone();
    req.properties["image_id"] = json!("ami-XYZ");
    let e = p
        .provision(req.clone(), &Unfenced)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("instance.properties.image_id"), "{e}");
    req.properties = base.clone();
    req.properties["region"] = json!("eu-west-1");
    let e = p
        .provision(req.clone(), &Unfenced)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("instance.properties.region"), "{e}");
    assert_eq!(proxy.calls("RunInstances"), 0);
    // What only EC2 knows comes back with EC2's code, permanently.
    req.properties = base;
    req.properties["subnets"] = json!({"us-east-1a": "subnet-0000000000000000f"});
    let e = p.provision(req, &Unfenced).await.unwrap_err();
    assert!(matches!(e, ProviderError::Permanent(_)), "{e}");
    assert!(e.to_string().contains("InvalidSubnetID.NotFound"), "{e}");
    assert!(moto.states().await.is_empty());
}

/// The join token goes to EC2 in `UserData` only (where the controller
/// rotates it once it has served), never in another parameter or header
/// of any request, nor in an error; a manager's user data carries the
/// store address and the provider's settings for its controller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_join_token_reaches_ec2_in_user_data_only() {
    use base64::Engine;
    let moto = Moto::start().await;
    let proxy = Proxy::start(&moto).await;
    let p = Ec2Provider::new(moto.settings(&proxy.endpoint));
    assert!(p.exposes_boot_env(), "the controller must rotate the token");
    let token = "SWMTKN-1-0123456789abcdefghijklmnopqrstuvwxyz-abcdefghijklmnopqrstuvwxy";
    let mut req = request(&moto, "c1", "op-1", None).await;
    req.boot_context = BootContext::example(Role::Manager);
    req.boot_env = vec![
        ("DROVER_JOIN_TOKEN".into(), Secret::new(token.to_string())),
        (
            "DROVER_STORE".into(),
            Secret::new("etcd://10.0.0.1:2379".to_string()),
        ),
    ];
    let id = p.provision(req.clone(), &Unfenced).await.unwrap();
    // The launch's answer lost once: the retry carries it again, still
    // only in UserData.
    proxy.set(Faults {
        drop_run_answers: 1,
        ..Faults::default()
    });
    let mut again = req.clone();
    again.tags.insert(tags::LINK.into(), "op-2".into());
    p.provision(again, &Unfenced).await.unwrap();
    p.describe(&cluster_tag("c1")).await.unwrap();
    p.destroy(&id).await.unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut user_data = Vec::new();
    for request in proxy.requests() {
        for (k, v) in request {
            if k == "UserData" {
                user_data.push(String::from_utf8(b64.decode(&v).unwrap()).unwrap());
            } else {
                assert!(
                    !v.contains(token) && !v.contains("0123456789abcdefghij"),
                    "{k}"
                );
            }
        }
    }
    assert_eq!(user_data.len(), 3, "two launches, one retried");
    let data = &user_data[0];
    assert!(data.starts_with("#!/bin/sh\n"), "{data}");
    for line in [
        format!("export DROVER_JOIN_TOKEN='{token}'"),
        "export DROVER_STORE='etcd://10.0.0.1:2379'".to_string(),
        "export DROVER_EC2='true'".to_string(),
        format!("export AWS_REGION='{REGION}'"),
        format!("export DROVER_EC2_ENDPOINT='{}'", proxy.endpoint),
    ] {
        assert!(data.lines().any(|l| l == line), "{line} not in {data}");
    }
    // A worker's carries no controller settings.
    let mut worker = req.clone();
    worker.boot_context = BootContext::example(Role::Worker);
    worker.tags.insert(tags::LINK.into(), "op-3".into());
    p.provision(worker, &Unfenced).await.unwrap();
    let last = proxy
        .requests()
        .into_iter()
        .rev()
        .find_map(|r| r.into_iter().find(|(k, _)| k == "UserData").map(|(_, v)| v));
    let last = String::from_utf8(b64.decode(last.unwrap()).unwrap()).unwrap();
    assert!(
        last.contains("DROVER_JOIN_TOKEN") && !last.contains("DROVER_EC2"),
        "{last}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_answers_and_controller_crashes_make_no_second_instance() {
    let moto = Moto::start().await;
    let proxy = Proxy::start(&moto).await;
    let req = request(&moto, "c1", "op-7", None).await;
    // Both first answers are lost after the launch took effect: the
    // provider's retries repeat the token and get the first instance.
    proxy.set(Faults {
        drop_run_answers: 2,
        ..Faults::default()
    });
    let p = Ec2Provider::new(moto.settings(&proxy.endpoint));
    let id = p.provision(req.clone(), &Unfenced).await.unwrap();
    assert_eq!(proxy.calls("RunInstances"), 3);
    // A controller that crashed before journaling the id retries the same
    // operation from a new process: the same instance again.
    for _ in 0..3 {
        let fresh = Ec2Provider::new(moto.settings(&proxy.endpoint));
        assert_eq!(fresh.provision(req.clone(), &Unfenced).await.unwrap(), id);
    }
    // Retried with other parameters (the join address changed meanwhile):
    // EC2 refuses the token's reuse; the instance made for it is found.
    let mut changed = req.clone();
    changed.boot_context.join_addr = "10.9.9.9:2377".into();
    let fresh = Ec2Provider::new(moto.settings(&proxy.endpoint));
    assert_eq!(fresh.provision(changed, &Unfenced).await.unwrap(), id);
    assert_eq!(
        moto.states().await,
        BTreeMap::from([("running".to_string(), 1)])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_describe_is_an_error_and_a_young_instance_is_not_lost() {
    let moto = Moto::start().await;
    let proxy = Proxy::start(&moto).await;
    let p = Ec2Provider::new(moto.settings(&proxy.endpoint));
    let id = p
        .provision(request(&moto, "c1", "op-1", None).await, &Unfenced)
        .await
        .unwrap();
    let launched = std::time::Instant::now();
    // Throttled past every retry: an error, never "no instances".
    proxy.set(Faults {
        throttle_next: [("DescribeInstances".to_string(), 1000)].into(),
        ..Faults::default()
    });
    let e = p.describe(&cluster_tag("c1")).await.unwrap_err();
    assert!(e.is_transient(), "{e}");
    assert!(p.metrics().throttles("DescribeInstances") >= 8);
    // A few throttles are absorbed by the retries.
    proxy.set(Faults {
        throttle_next: [("DescribeInstances".to_string(), 3)].into(),
        ..Faults::default()
    });
    assert_eq!(p.describe(&cluster_tag("c1")).await.unwrap().len(), 1);
    // EC2 does not list a new instance yet: it still counts, and
    // terminating it is retried rather than taken as done. (The first
    // instance is older than that by then: EC2 lists it.)
    let hidden = Duration::from_secs(3);
    tokio::time::sleep(hidden.saturating_sub(launched.elapsed())).await;
    proxy.set(Faults {
        invisible_for: hidden,
        ..Faults::default()
    });
    let young = p
        .provision(request(&moto, "c1", "op-2", None).await, &Unfenced)
        .await
        .unwrap();
    let fresh = Ec2Provider::new(moto.settings(&proxy.endpoint));
    let seen_by_fresh = fresh.describe(&cluster_tag("c1")).await.unwrap();
    assert_eq!(
        seen_by_fresh.len(),
        1,
        "EC2 hides it from a process that did not launch it"
    );
    let seen = p.describe(&cluster_tag("c1")).await.unwrap();
    let mut ids: Vec<&str> = seen.iter().map(|i| i.id.as_str()).collect();
    ids.sort();
    let mut want = vec![id.as_str(), young.as_str()];
    want.sort();
    assert_eq!(ids, want);
    let e = p.destroy(&young).await.unwrap_err();
    assert!(e.is_transient(), "{e}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let another = Ec2Provider::new(moto.settings(&proxy.endpoint));
    assert_eq!(another.describe(&cluster_tag("c1")).await.unwrap().len(), 2);
    p.destroy(&young).await.unwrap();
    assert_eq!(
        moto.states().await,
        BTreeMap::from([("running".to_string(), 1), ("terminated".to_string(), 1)])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_converges_under_sustained_throttling() {
    let moto = Moto::start().await;
    let proxy = Proxy::start(&moto).await;
    // EC2 allows less than the provider's defaults assume: the proxy's
    // buckets throttle, the provider's drain and back off.
    let slow = Rate {
        per_sec: 2.0,
        burst: 2.0,
    };
    proxy.set(Faults {
        rates: Some(Rates {
            describe: slow,
            run: slow,
            mutate: slow,
        }),
        ..Faults::default()
    });
    let p = Ec2Provider::new(moto.settings(&proxy.endpoint));
    let req = request(&moto, "c1", "x", None).await;
    let launches = (0..10).map(|n| {
        let p = p.clone();
        let mut req = req.clone();
        req.tags.insert(tags::LINK.to_string(), format!("op-{n}"));
        tokio::spawn(async move { p.provision(req, &Unfenced).await })
    });
    let watcher = {
        let p = p.clone();
        tokio::spawn(async move {
            let mut seen = 0;
            while seen < 10 {
                if let Ok(listed) = p.describe(&cluster_tag("c1")).await {
                    seen = listed.len();
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let mut ids = Vec::new();
    for l in launches {
        ids.push(l.await.unwrap().expect("every launch gets through"));
    }
    tokio::time::timeout(Duration::from_secs(60), watcher)
        .await
        .unwrap()
        .unwrap();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 10);
    assert_eq!(
        moto.states().await,
        BTreeMap::from([("running".to_string(), 10)])
    );
    assert!(proxy.throttled("RunInstances") + proxy.throttled("DescribeInstances") > 0);
    let stops = ids.iter().map(|id| {
        let (p, id) = (p.clone(), id.clone());
        tokio::spawn(async move { p.destroy(&id).await })
    });
    for s in stops {
        s.await.unwrap().unwrap();
    }
    assert_eq!(
        moto.states().await,
        BTreeMap::from([("terminated".to_string(), 10)])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launches_queued_in_turn_leave_no_faster_than_ec2_counts_them() {
    // The controller queues a launch (`ready`) before it takes the lease
    // the launch is made under, so launches reserved in turn may leave out
    // of turn. EC2 counts arrivals: two leaving closer than its rate once
    // the burst is spent are throttled, and each throttle costs a token.
    let moto = Moto::start().await;
    let proxy = Proxy::start(&moto).await;
    let run = Rate {
        per_sec: 5.0,
        burst: 1.0,
    };
    let rates = Rates {
        run,
        ..Rates::default()
    };
    proxy.set(Faults {
        rates: Some(rates),
        ..Faults::default()
    });
    let settings = drover_ec2::Settings {
        rates,
        ..moto.settings(&proxy.endpoint)
    };
    let p = Ec2Provider::new(settings);
    let req = request(&moto, "c1", "x", None).await;
    let launches = (0..16u64).map(|n| {
        let p = p.clone();
        let mut req = req.clone();
        req.tags.insert(tags::LINK.to_string(), format!("op-{n}"));
        tokio::spawn(async move {
            p.ready(ProviderCall::Provision).await;
            // Every other launch's lease took longer to get.
            tokio::time::sleep(Duration::from_millis(150 * (n % 2))).await;
            p.provision(req, &Unfenced).await
        })
    });
    for l in launches {
        l.await.unwrap().expect("every launch gets through");
    }
    // Paced to leave room for the way's jitter (without it: 5 to 7 of 16
    // throttled); three throttles are left to a machine stalling the test
    // (or the proxy, which timestamps arrivals) for longer than that room:
    // 2 seen with two builds beside the suite, 3 at load average 15 (two
    // end-to-end suites and a build beside it).
    let throttled = proxy.throttled("RunInstances");
    assert!(throttled <= 3, "{throttled} launches throttled");
    assert_eq!(proxy.calls("RunInstances"), 16 + throttled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_plans_on_the_newest_answer_with_its_own_changes_and_never_on_a_failed_one() {
    // Describes take 2 s here (a large cluster's do): a pass waits for the
    // first only; later ones plan on the newest answer while the next
    // describe runs, with what this process did since laid over it.
    let moto = Moto::start().await;
    let proxy = Proxy::start(&moto).await;
    let p = Ec2Provider::new(moto.settings(&proxy.endpoint));
    let a = p
        .provision(request(&moto, "c1", "op-1", None).await, &Unfenced)
        .await
        .unwrap();
    let slow = Duration::from_secs(2);
    proxy.set(Faults {
        describe_delay: slow,
        ..Faults::default()
    });
    let timed = |p: Ec2Provider| async move {
        let t0 = std::time::Instant::now();
        let listed = p.describe(&cluster_tag("c1")).await;
        let ids: Option<Vec<String>> = listed.ok().map(|l| l.into_iter().map(|i| i.id).collect());
        (ids, t0.elapsed())
    };
    let (ids, took) = timed(p.clone()).await;
    assert_eq!(ids, Some(vec![a.clone()]));
    assert!(took >= slow, "the first describe is waited for");
    // Terminated and launched since: shown at once, on the same answer.
    p.destroy(&a).await.unwrap();
    let b = p
        .provision(request(&moto, "c1", "op-2", None).await, &Unfenced)
        .await
        .unwrap();
    let (ids, took) = timed(p.clone()).await;
    assert_eq!(ids, Some(vec![b.clone()]));
    assert!(took < slow / 2, "planned on the kept answer: {took:?}");
    // A look that must be EC2's word as of now (a new term's first, an
    // ownership check before a destroy) waits for a describe of its own:
    // what another process did shows.
    let other = request(&moto, "c1", "op-3", None).await;
    let c = moto.provider().provision(other, &Unfenced).await.unwrap();
    let t0 = std::time::Instant::now();
    let now = p.describe_fresh(&cluster_tag("c1")).await.unwrap();
    assert!(t0.elapsed() >= slow);
    let mut ids: Vec<String> = now.into_iter().map(|i| i.id).collect();
    ids.sort();
    let mut want = vec![b.clone(), c];
    want.sort();
    assert_eq!(ids, want);
    // A describe fails (throttled past every retry): the pass after it
    // waits for its own, and fails with it, never planning on old news.
    tokio::time::sleep(slow + Duration::from_millis(500)).await;
    proxy.set(Faults {
        throttle_next: [("DescribeInstances".to_string(), 1000)].into(),
        ..Faults::default()
    });
    let (_, took) = timed(p.clone()).await;
    assert!(took < slow / 2, "the answer kept is still fresh");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (ids, _) = timed(p.clone()).await;
        if ids.is_none() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a failed describe was planned around"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    proxy.set(Faults::default());
    let (ids, _) = timed(p.clone()).await;
    assert_eq!(ids.map(|i| i.len()), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_describe_pages_through_every_instance_and_shows_no_secret() {
    let moto = Moto::start().await;
    let proxy = Proxy::start(&moto).await;
    let mut settings = moto.settings(&proxy.endpoint);
    settings.page = 5;
    let p = Ec2Provider::new(settings);
    let req = request(&moto, "c1", "x", None).await;
    for n in 0..12 {
        let mut req = req.clone();
        req.tags.insert(tags::LINK.to_string(), format!("op-{n}"));
        p.provision(req, &Unfenced).await.unwrap();
    }
    // Processes that did not launch them (no young instance to add).
    let whole_pages = Ec2Provider::new(moto.settings(&proxy.endpoint));
    let mut small = moto.settings(&proxy.endpoint);
    small.page = 5;
    let small_pages = Ec2Provider::new(small);
    let before = proxy.calls("DescribeInstances");
    let mut paged = small_pages.describe(&cluster_tag("c1")).await.unwrap();
    assert_eq!(paged.len(), 12);
    assert_eq!(
        proxy.calls("DescribeInstances") - before,
        3,
        "pages of 5, 5, 2"
    );
    paged.sort_by(|a, b| a.id.cmp(&b.id));
    let mut whole = whole_pages.describe(&cluster_tag("c1")).await.unwrap();
    whole.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(paged, whole);
    // Neither the provider nor its settings show the secret key.
    let Credentials::Static { secret_key, .. } = moto.credentials() else {
        unreachable!()
    };
    for shown in [
        format!("{p:?}"),
        format!("{:?}", moto.settings(&moto.endpoint)),
    ] {
        assert!(!shown.contains(&secret_key), "{shown}");
    }
}
