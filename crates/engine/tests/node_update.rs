//! The engine's own precondition on node updates, against a fake engine on
//! a unix socket: every update carries the node `version` read right before
//! it and the node's full spec; "update out of sequence" (someone else
//! changed the node meanwhile) makes it read again and retry with the new
//! version and the other writer's change kept (swarm-facts, API details).
//! A late update from a controller that was paused therefore changes its one
//! field of the node as it is now, never an old copy of the whole node.

use drover_engine::Engine;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

/// The node as the fake swarm holds it, and every update sent to it.
struct Swarm {
    version: u64,
    spec: Value,
    /// `(version sent, spec sent)` of each update, refused ones included.
    updates: Vec<(u64, Value)>,
    /// Refuse the next update as out of sequence, after another writer
    /// changed the node.
    race: bool,
}

/// One HTTP/1.1 request: method, target, body.
async fn request(r: &mut BufReader<UnixStream>) -> Option<(String, String, Vec<u8>)> {
    let mut line = String::new();
    if r.read_line(&mut line).await.ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut length = 0;
    loop {
        let mut header = String::new();
        r.read_line(&mut header).await.ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((k, v)) = header.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    r.read_exact(&mut body).await.ok()?;
    Some((method, target, body))
}

fn answer(swarm: &Mutex<Swarm>, method: &str, target: &str, body: &[u8]) -> (u16, Value) {
    let mut s = swarm.lock().unwrap();
    let path = target.split('?').next().unwrap_or_default();
    if path.ends_with("/version") {
        return (200, json!({"ApiVersion": "1.41", "Version": "20.10.24"}));
    }
    if method == "GET" && path.ends_with("/nodes/n1") {
        return (
            200,
            json!({"ID": "n1", "Version": {"Index": s.version}, "Spec": s.spec}),
        );
    }
    if method == "POST" && path.ends_with("/nodes/n1/update") {
        let sent: u64 = target
            .split("version=")
            .nth(1)
            .and_then(|v| v.split('&').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let spec: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        s.updates.push((sent, spec.clone()));
        if s.race {
            // Another writer got there first.
            s.race = false;
            s.version += 1;
            s.spec["Labels"]["other"] = json!("1");
        }
        if sent != s.version {
            return (
                500,
                json!({"message": "rpc error: code = Unknown desc = update out of sequence"}),
            );
        }
        s.version += 1;
        s.spec = spec;
        return (200, Value::Null);
    }
    (
        404,
        json!({"message": format!("no route {method} {target}")}),
    )
}

async fn serve(listener: UnixListener, swarm: Arc<Mutex<Swarm>>) {
    while let Ok((stream, _)) = listener.accept().await {
        let swarm = swarm.clone();
        tokio::spawn(async move {
            let mut r = BufReader::new(stream);
            while let Some((method, target, body)) = request(&mut r).await {
                let (status, value) = answer(&swarm, &method, &target, &body);
                let body = if value.is_null() {
                    Vec::new()
                } else {
                    serde_json::to_vec(&value).unwrap()
                };
                let head = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                );
                let w = r.get_mut();
                if w.write_all(head.as_bytes()).await.is_err() || w.write_all(&body).await.is_err()
                {
                    return;
                }
            }
        });
    }
}

/// An engine client to a fake engine in `dir` whose manager node `n1`
/// (version 10) is changed by another writer once, between a read and
/// the update; the fake's state and its server task.
async fn racing_engine(
    dir: &tempfile::TempDir,
) -> (Engine, Arc<Mutex<Swarm>>, tokio::task::JoinHandle<()>) {
    let socket = dir.path().join("docker.sock");
    let swarm = Arc::new(Mutex::new(Swarm {
        version: 10,
        spec: json!({"Role": "manager", "Availability": "active", "Labels": {"mine": "x"}}),
        updates: Vec::new(),
        race: true,
    }));
    let server = tokio::spawn(serve(UnixListener::bind(&socket).unwrap(), swarm.clone()));
    let engine = Engine::connect(socket.to_str().unwrap()).await.unwrap();
    (engine, swarm, server)
}

#[tokio::test]
async fn a_node_update_is_sent_with_the_version_just_read_and_retried_on_a_race() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, swarm, server) = racing_engine(&dir).await;

    engine.demote("n1", &drover_spi::Unfenced).await.unwrap();

    let s = swarm.lock().unwrap();
    let sent: Vec<u64> = s.updates.iter().map(|(v, _)| *v).collect();
    assert_eq!(
        sent,
        vec![10, 11],
        "each attempt carries the version read right before it"
    );
    assert_eq!(s.spec["Role"], "worker");
    assert_eq!(s.spec["Availability"], "active", "the full spec is sent");
    assert_eq!(
        s.spec["Labels"],
        json!({"mine": "x", "other": "1"}),
        "the other writer's change was overwritten by a stale copy"
    );
    server.abort();
}

/// A lease that runs out after `passes` checks (a controller stopped
/// between two attempts of a node update).
struct Runs {
    passes: Mutex<u32>,
}

impl drover_spi::Fence for Runs {
    fn check(&self) -> Result<(), drover_spi::LeaseExpired> {
        let mut left = self.passes.lock().unwrap();
        if *left == 0 {
            return Err(drover_spi::LeaseExpired("expired in the test".into()));
        }
        *left -= 1;
        Ok(())
    }
}

#[tokio::test]
async fn a_retry_after_the_lease_ran_out_sends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, swarm, server) = racing_engine(&dir).await;

    // The first attempt is checked and sent (and refused, out of sequence);
    // the lease runs out before the retry.
    let fence = Runs {
        passes: Mutex::new(1),
    };
    let e = engine
        .demote("n1", &fence)
        .await
        .expect_err("a retry past its lease");
    assert!(matches!(e, drover_engine::EngineError::Fenced(_)), "{e}");
    let s = swarm.lock().unwrap();
    let sent: Vec<u64> = s.updates.iter().map(|(v, _)| *v).collect();
    assert_eq!(sent, vec![10], "an update was sent after the lease ran out");
    assert_eq!(s.spec["Role"], "manager");
    drop(s);
    server.abort();
}
