//! Stores that are not there, through the binary, with no engine and no
//! etcd: a closed port, a malformed address, an endpoint that accepts and
//! never answers, a web server where an engine should be, a file store that
//! does not exist. Each ends in one sentence naming the store and what to
//! check, with the exit code of its kind, and changes nothing.

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Output;
use std::time::{Duration, Instant};

fn drover(args: &[&str]) -> Output {
    support::drover_at_root(
        args,
        &[
            "DROVER_STORE",
            "DROVER_STORE_TIMEOUT",
            "DOCKER_HOST",
            "DOCKER_TLS_VERIFY",
        ],
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A port on which nothing listens (bound, then closed).
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A listener that accepts every connection and never answers; the
/// connections stay open for the life of the test process.
fn silent_listener() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn);
        }
    });
    port
}

/// A web server answering every request with `status` and a long HTML page.
fn web_server(status: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || answer(conn, status));
        }
    });
    port
}

fn answer(mut conn: TcpStream, status: &str) {
    let mut buf = [0u8; 4096];
    let _ = conn.read(&mut buf);
    let body = format!(
        "<!DOCTYPE html>\n<html>\n<head><title>{status}</title></head>\n<body>\n<h1>{status}</h1>\n<p>{}</p>\n</body>\n</html>\n",
        "The requested URL was not found on this server. ".repeat(100)
    );
    let _ = write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// One line on stderr, `drover: ` first.
fn one_sentence(err: &str) {
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("drover: "), "{err}");
}

#[test]
fn unreachable_etcd_is_one_sentence_naming_the_endpoint_and_what_to_check() {
    let port = closed_port();
    let url = format!("etcd://127.0.0.1:{port}");
    let out = drover(&["status", "--store", &url]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    one_sentence(&err);
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(err.contains("check that etcd is running"), "{err}");
    for chain in [
        "transport error",
        "source:",
        "Status {",
        "tcp connect error",
    ] {
        assert!(!err.contains(chain), "library error chain in: {err}");
    }
}

#[test]
fn an_unreachable_engine_is_one_sentence_with_the_cause() {
    let port = closed_port();
    let url = format!("swarm:tcp://127.0.0.1:{port}");
    let out = drover(&["status", "--store", &url]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    one_sentence(&err);
    assert!(
        err.contains(&format!(
            "cannot reach the docker engine at tcp://127.0.0.1:{port}"
        )) && err.contains("Connection refused"),
        "{err}"
    );
    assert!(
        !err.contains("client error"),
        "library error chain in: {err}"
    );
}

#[test]
fn a_malformed_store_address_is_bad_input_naming_the_argument() {
    for url in [
        "etcd://127.0.0.1:notaport",
        "etcd://127.0.0.1:99999",
        "etcd://127.0.0.1",
        "etcd://:2379",
    ] {
        let started = Instant::now();
        let out = drover(&["history", "--store", url]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{url}: {err}");
        one_sentence(&err);
        assert!(
            err.contains("--store") && err.contains("host:port"),
            "{err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{url} was dialled"
        );
    }
}

#[test]
fn an_etcd_that_never_answers_gives_up_at_the_store_timeout() {
    let port = silent_listener();
    let url = format!("etcd://127.0.0.1:{port}");
    let started = Instant::now();
    let out = drover(&["status", "--store", &url, "--store-timeout", "1s"]);
    let took = started.elapsed();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    one_sentence(&err);
    assert!(
        err.contains(&format!(
            "etcd at 127.0.0.1:{port} did not answer within 1s"
        )),
        "{err}"
    );
    assert!(err.contains("--store-timeout"), "{err}");
    assert!(took < Duration::from_secs(4), "took {took:?}");
}

#[test]
fn an_engine_that_never_answers_gives_up_at_the_default_store_timeout() {
    let port = silent_listener();
    let url = format!("swarm:tcp://127.0.0.1:{port}");
    let started = Instant::now();
    let out = drover(&["history", "--store", &url]);
    let took = started.elapsed();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    one_sentence(&err);
    assert!(err.contains("did not answer within 5s"), "{err}");
    assert!(took < Duration::from_secs(9), "took {took:?}");
}

#[test]
fn a_store_timeout_outside_the_grammar_is_bad_input() {
    for bad in ["5", "0s", "5 min", "2M"] {
        let out = drover(&["status", "--store", "swarm", "--store-timeout", bad]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("--store-timeout"), "{err}");
    }
}

#[test]
fn a_web_server_where_the_engine_should_be_is_summarised_not_dumped() {
    for status in ["404 Not Found", "200 OK"] {
        let port = web_server(status);
        let url = format!("swarm:tcp://127.0.0.1:{port}");
        let out = drover(&["status", "--store", &url]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        one_sentence(&err);
        assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
        assert!(err.len() < 400, "{} bytes: {err}", err.len());
        assert!(!err.contains("<html") && !err.contains("<p>"), "{err}");
    }
}

#[test]
fn read_only_commands_never_create_a_file_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.db");
    let url = format!("file://{}", path.display());
    for args in [
        vec!["status"],
        vec!["status", "--output", "json"],
        vec!["history"],
        vec!["events"],
        vec!["export"],
        vec!["diff", "1"],
        vec!["gc", "--dry-run"],
        vec!["plan", "-f", "examples/cluster.yaml"],
        vec!["pause", "workers"],
        vec!["hold", "i1"],
        vec!["rollback", "workers"],
        vec!["apply", "-f", "examples/cluster.yaml", "--dry-run"],
    ] {
        let mut argv = args.clone();
        argv.extend(["--store", &url]);
        let out = drover(&argv);
        let err = stderr(&out);
        assert!(!path.exists(), "{args:?} created {}", path.display());
        if args.contains(&"--dry-run") && args[0] == "apply" {
            assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
            continue;
        }
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        one_sentence(&err);
        assert!(
            err.contains(&format!("{} does not exist", path.display())),
            "{args:?}: {err}"
        );
    }
}
