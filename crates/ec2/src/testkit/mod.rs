//! Test helpers: moto (PyPI `moto[server]`, installed by
//! scripts/setup.sh into /opt/drover-moto) as the real EC2 API on a
//! loopback port, checking SigV4 signatures; and a fault-injecting proxy
//! in front of it that plays what moto does not: throttling, eventual
//! consistency, lost answers and `ClientToken` idempotency. Each [`Moto`]
//! is one server (so one account's state) for one test, killed by its PID
//! when dropped, also when the test fails.

pub mod controlled;

use crate::api::{Api, ApiError, Credentials};
use crate::throttle::{Bucket, Family, Rates};
use crate::{Ec2Provider, Settings};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use std::collections::{BTreeMap, HashMap};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The region the tests use (moto's default VPC has a subnet per zone).
pub const REGION: &str = "us-east-1";
/// An AMI moto knows.
pub const AMI: &str = "ami-12c6146b";

/// One moto server on a free loopback port, with an IAM user whose key
/// the provider signs with (moto checks every signature).
pub struct Moto {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    access_key: String,
    secret_key: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        // By its PID (the child we spawned), never by a name pattern.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto_server() -> String {
    std::env::var("DROVER_MOTO_SERVER")
        .unwrap_or_else(|_| "/opt/drover-moto/bin/moto_server".into())
}

impl Moto {
    /// Starts moto, creates the test user (while moto still lets
    /// unsigned calls through) and turns signature checking on.
    pub async fn start() -> Moto {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let child = Command::new(moto_server())
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server (scripts/setup.sh installs it into /opt/drover-moto)");
        let mut moto = Moto {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            access_key: String::new(),
            secret_key: String::new(),
        };
        let http = crate::api::http_client(Duration::from_secs(10));
        let t0 = Instant::now();
        while http
            .get(format!("{}/moto-api/", moto.endpoint))
            .send()
            .await
            .is_err()
        {
            assert!(t0.elapsed() < Duration::from_secs(60), "moto did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let iam = Api::new(
            "iam",
            REGION,
            Some(&moto.endpoint),
            Credentials::Static {
                access_key: "bootstrap".into(),
                secret_key: "bootstrap".into(),
            },
        );
        let user = [("UserName".to_string(), "drover".to_string())];
        iam.call("CreateUser", &user).await.expect("CreateUser");
        let key = iam
            .call("CreateAccessKey", &user)
            .await
            .expect("CreateAccessKey");
        moto.access_key = element(&key, "AccessKeyId");
        moto.secret_key = element(&key, "SecretAccessKey");
        let mut policy = user.to_vec();
        policy.push(("PolicyName".into(), "all".into()));
        policy.push((
            "PolicyDocument".into(),
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#.into(),
        ));
        iam.call("PutUserPolicy", &policy)
            .await
            .expect("PutUserPolicy");
        let on = http
            .post(format!("{}/moto-api/reset-auth", moto.endpoint))
            .body("0")
            .send()
            .await
            .expect("turning moto's signature checks on");
        assert!(on.status().is_success());
        moto
    }

    /// The test user's key.
    pub fn credentials(&self) -> Credentials {
        Credentials::Static {
            access_key: self.access_key.clone(),
            secret_key: self.secret_key.clone(),
        }
    }

    /// Settings for a provider calling `endpoint` (moto's, or a proxy's)
    /// with quick retries.
    pub fn settings(&self, endpoint: &str) -> Settings {
        Settings {
            credentials: self.credentials(),
            retry: crate::client::Retry {
                min_delay: Duration::from_millis(20),
                max_delay: Duration::from_millis(500),
                times: 8,
            },
            ..Settings::new(REGION, Some(endpoint))
        }
    }

    /// A provider talking to moto directly.
    pub fn provider(&self) -> Ec2Provider {
        Ec2Provider::new(self.settings(&self.endpoint))
    }

    /// A signed EC2 client straight to moto (for checks behind the
    /// provider's back).
    pub fn ec2(&self) -> Api {
        Api::new("ec2", REGION, Some(&self.endpoint), self.credentials())
    }

    /// The default VPC's subnet of each zone.
    pub async fn subnets(&self) -> BTreeMap<String, String> {
        let text = self
            .ec2()
            .call("DescribeSubnets", &[])
            .await
            .expect("DescribeSubnets");
        let ids = elements(&text, "subnetId");
        let zones = elements(&text, "availabilityZone");
        zones.into_iter().zip(ids).collect()
    }

    /// How many instances moto holds in each state, whatever their tags.
    pub async fn states(&self) -> BTreeMap<String, usize> {
        let text = self
            .ec2()
            .call("DescribeInstances", &[])
            .await
            .expect("DescribeInstances");
        let page: crate::xml::DescribeInstances = crate::xml::parse(&text).expect("a describe");
        let mut out = BTreeMap::new();
        for r in &page.reservation_set.items {
            for i in &r.instances_set.items {
                *out.entry(i.instance_state.name.clone()).or_default() += 1;
            }
        }
        out
    }
}

/// One instance as moto holds it, for the end-to-end data plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// `i-…`.
    pub id: String,
    /// `running`, `terminated`, …
    pub state: String,
    /// Its private IPv4 address.
    pub private_ip: String,
}

impl Moto {
    /// Every instance moto holds, in any state, whatever its tags.
    pub async fn instances(&self) -> Result<Vec<Held>, ApiError> {
        let text = self.ec2().call("DescribeInstances", &[]).await?;
        let page: crate::xml::DescribeInstances = crate::xml::parse(&text)
            .map_err(|e| ApiError::Transport(format!("unreadable answer: {e}")))?;
        Ok(page
            .reservation_set
            .items
            .iter()
            .flat_map(|r| &r.instances_set.items)
            .map(|i| Held {
                id: i.instance_id.clone(),
                state: i.instance_state.name.clone(),
                private_ip: i.private_ip_address.clone().unwrap_or_default(),
            })
            .collect())
    }

    /// Instance `id`'s user data, decoded (what cloud-init would run).
    pub async fn user_data(&self, id: &str) -> Result<String, ApiError> {
        use base64::Engine;
        let text = self
            .ec2()
            .call(
                "DescribeInstanceAttribute",
                &[
                    ("InstanceId".into(), id.to_string()),
                    ("Attribute".into(), "userData".into()),
                ],
            )
            .await?;
        let value = element(&text, "value");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(value.trim())
            .map_err(|e| ApiError::Transport(format!("user data: {e}")))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// The text of the first `<name>` element of `xml`.
fn element(xml: &str, name: &str) -> String {
    elements(xml, name).into_iter().next().unwrap_or_default()
}

/// The texts of every `<name>` element of `xml`.
fn elements(xml: &str, name: &str) -> Vec<String> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    xml.split(&open)
        .skip(1)
        .filter_map(|s| s.split_once(&close).map(|(v, _)| v.to_string()))
        .collect()
}

/// What the proxy does wrong, on purpose.
#[derive(Debug, Default, Clone)]
pub struct Faults {
    /// `RequestLimitExceeded` for the next N calls of each action.
    pub throttle_next: HashMap<String, u32>,
    /// EC2's own rate limits, as token buckets: a call finding its
    /// family's empty is throttled.
    pub rates: Option<Rates>,
    /// The next N `RunInstances` take effect, then their answer is lost.
    pub drop_run_answers: u32,
    /// Instances younger than this are not yet visible: describes omit
    /// them, and calls naming them get `InvalidInstanceID.NotFound`.
    pub invisible_for: Duration,
    /// `DescribeInstances` answers this much after moto did (the world as
    /// it was when asked): a slow describe of a large cluster.
    pub describe_delay: Duration,
}

#[derive(Default)]
struct Shared {
    faults: Faults,
    buckets: Option<[Bucket; 3]>,
    /// `ClientToken` → the launch's parameters and EC2's answer.
    tokens: HashMap<String, (Vec<(String, String)>, String)>,
    /// Instance id → its reservation and when it was launched.
    launched: HashMap<String, (String, Instant)>,
    calls: HashMap<String, u64>,
    throttled: HashMap<String, u64>,
    /// Every request as received: its headers (`header:NAME`) and its
    /// form parameters, for tests that look for what must not be sent.
    requests: Vec<Vec<(String, String)>>,
}

/// A fault-injecting EC2 proxy on a loopback port, in front of moto. It
/// forwards requests unchanged (the signature covers the Host header it
/// keeps), and plays EC2's `ClientToken` idempotency: a launch repeating
/// a token with the same parameters gets the first answer, with other
/// parameters `IdempotentParameterMismatch`.
pub struct Proxy {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    shared: Arc<Mutex<Shared>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.server.abort();
    }
}

struct Upstream {
    moto: String,
    http: reqwest::Client,
    shared: Arc<Mutex<Shared>>,
}

impl Proxy {
    /// A proxy to `moto` with no fault yet.
    pub async fn start(moto: &Moto) -> Proxy {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let upstream = Arc::new(Upstream {
            moto: moto.endpoint.clone(),
            http: crate::api::http_client(Duration::from_secs(60)),
            shared: shared.clone(),
        });
        let app = axum::Router::new().fallback(forward).with_state(upstream);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let endpoint = format!("http://{}", listener.local_addr().expect("its address"));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Proxy {
            endpoint,
            shared,
            server,
        }
    }

    /// Sets the faults from now on.
    pub fn set(&self, faults: Faults) {
        let mut s = self.lock();
        s.buckets = faults.rates.map(|r| r.buckets(Instant::now()));
        s.faults = faults;
    }

    /// Calls of `action` that reached the proxy.
    pub fn calls(&self, action: &str) -> u64 {
        self.lock().calls.get(action).copied().unwrap_or(0)
    }

    /// Every request received so far: its headers (named `header:NAME`)
    /// and form parameters.
    pub fn requests(&self) -> Vec<Vec<(String, String)>> {
        self.lock().requests.clone()
    }

    /// Calls of `action` the proxy throttled.
    pub fn throttled(&self, action: &str) -> u64 {
        self.lock().throttled.get(action).copied().unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What the proxy decided before forwarding.
enum Verdict {
    Answer(Response),
    Forward,
}

async fn forward(State(up): State<Arc<Upstream>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let Ok(body) = axum::body::to_bytes(body, usize::MAX).await else {
        return status(400, String::new());
    };
    let form: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
    let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let action = get("Action").unwrap_or_default();
    let token = get("ClientToken");
    {
        let headers = parts.headers.iter().map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (format!("header:{name}"), value)
        });
        let mut s = up.shared.lock().unwrap_or_else(|e| e.into_inner());
        s.requests
            .push(headers.chain(form.iter().cloned()).collect());
    }
    match before(&up, &action, &form, token.as_deref()) {
        Verdict::Answer(r) => return r,
        Verdict::Forward => {}
    }
    let mut fwd = up.http.post(format!("{}{}", up.moto, parts.uri.path()));
    // As sent (the signature covers Host), less what the body sets again.
    for (name, value) in &parts.headers {
        if name != axum::http::header::CONTENT_LENGTH
            && name != axum::http::header::TRANSFER_ENCODING
        {
            fwd = fwd.header(name, value);
        }
    }
    let answer = match fwd.body(body.to_vec()).send().await {
        Ok(a) => a,
        Err(_) => return status(502, String::new()),
    };
    let code = answer.status().as_u16();
    let text = answer.text().await.unwrap_or_default();
    if action == "DescribeInstances" {
        let delay = up
            .shared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .faults
            .describe_delay;
        tokio::time::sleep(delay).await;
    }
    after(&up, &action, &form, token, code, text)
}

/// Counting, throttling, idempotency and invisibility: what is decided
/// before moto sees the call.
fn before(up: &Upstream, action: &str, form: &[(String, String)], token: Option<&str>) -> Verdict {
    let mut s = up.shared.lock().unwrap_or_else(|e| e.into_inner());
    *s.calls.entry(action.to_string()).or_default() += 1;
    let now = Instant::now();
    let scripted = match s.faults.throttle_next.get_mut(action) {
        Some(n) if *n > 0 => {
            *n -= 1;
            true
        }
        _ => false,
    };
    let family = Family::of(action).index();
    let limited = s.buckets.as_mut().is_some_and(|b| !b[family].try_take(now));
    if scripted || limited {
        *s.throttled.entry(action.to_string()).or_default() += 1;
        return Verdict::Answer(aws_error(
            503,
            "RequestLimitExceeded",
            "Request limit exceeded.",
        ));
    }
    if action == "RunInstances"
        && let Some(t) = token
        && let Some((params, answer)) = s.tokens.get(t)
    {
        let same = params == form;
        let answer = answer.clone();
        return Verdict::Answer(if same && s.faults.drop_run_answers > 0 {
            s.faults.drop_run_answers -= 1;
            status(502, String::new())
        } else if same {
            status(200, answer)
        } else {
            aws_error(
                400,
                "IdempotentParameterMismatch",
                "The client token is already in use with other parameters.",
            )
        });
    }
    let invisible = s.faults.invisible_for;
    let young = |id: &str| {
        s.launched
            .get(id)
            .is_some_and(|(_, at)| now.duration_since(*at) < invisible)
    };
    let named = form
        .iter()
        .filter(|(k, _)| k.starts_with("InstanceId.") || k.starts_with("ResourceId."))
        .find(|(_, v)| young(v));
    if let Some((_, id)) = named {
        return Verdict::Answer(aws_error(
            400,
            "InvalidInstanceID.NotFound",
            &format!("The instance ID '{id}' does not exist"),
        ));
    }
    Verdict::Forward
}

/// Recording launches, hiding young instances, losing answers.
fn after(
    up: &Upstream,
    action: &str,
    form: &[(String, String)],
    token: Option<String>,
    code: u16,
    text: String,
) -> Response {
    let mut s = up.shared.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    match action {
        "RunInstances" if code == 200 => {
            let reservation = element(&text, "reservationId");
            for id in elements(&text, "instanceId") {
                s.launched.insert(id, (reservation.clone(), now));
            }
            if let Some(t) = token {
                s.tokens.insert(t, (form.to_vec(), text.clone()));
            }
            if s.faults.drop_run_answers > 0 {
                s.faults.drop_run_answers -= 1;
                return status(502, String::new());
            }
            status(code, text)
        }
        "DescribeInstances" if code == 200 => {
            let invisible = s.faults.invisible_for;
            let hidden: Vec<&String> = s
                .launched
                .values()
                .filter(|(_, at)| now.duration_since(*at) < invisible)
                .map(|(r, _)| r)
                .collect();
            let mut text = text;
            for r in hidden {
                text = without_reservation(&text, r);
            }
            status(code, text)
        }
        _ => status(code, text),
    }
}

/// `xml` without the reservation `<item>` whose id is `reservation`.
fn without_reservation(xml: &str, reservation: &str) -> String {
    let marker = format!("<item><reservationId>{reservation}</reservationId>");
    let Some(start) = xml.find(&marker) else {
        return xml.to_string();
    };
    let mut depth = 0usize;
    let mut i = start;
    while i < xml.len() {
        let rest = &xml[i..];
        if rest.starts_with("<item>") {
            depth += 1;
            i += "<item>".len();
        } else if rest.starts_with("</item>") {
            depth -= 1;
            i += "</item>".len();
            if depth == 0 {
                return format!("{}{}", &xml[..start], &xml[i..]);
            }
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    xml.to_string()
}

fn status(code: u16, body: String) -> Response {
    Response::builder()
        .status(code)
        .header("content-type", "text/xml")
        .body(Body::from(body))
        .unwrap_or_default()
}

fn aws_error(code: u16, aws: &str, message: &str) -> Response {
    status(
        code,
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Errors><Error><Code>{aws}</Code><Message>{message}</Message></Error></Errors><RequestID>proxy</RequestID></Response>"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reservation_is_cut_out_whole() {
        let xml = "<r><reservationSet><item><reservationId>r-1</reservationId><instancesSet><item><instanceId>i-1</instanceId><tagSet><item><key>k</key></item></tagSet></item></instancesSet></item><item><reservationId>r-2</reservationId></item></reservationSet></r>";
        assert_eq!(
            without_reservation(xml, "r-1"),
            "<r><reservationSet><item><reservationId>r-2</reservationId></item></reservationSet></r>"
        );
        assert_eq!(without_reservation(xml, "r-9"), xml);
    }
}
