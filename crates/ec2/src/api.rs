//! One signed call of an AWS Query API (EC2's, and IAM's for the test
//! kit): a form-encoded `POST`, signed with SigV4 by `reqsign` (never by
//! hand), its XML answer returned as text or its error as AWS's code.
//!
//! Credentials come from the standard AWS chain (environment, shared
//! profile, web identity, ECS container and IMDSv2 instance metadata)
//! through `reqsign`'s default provider; nothing here ever formats them:
//! errors carry AWS's code and message, and `Api`'s `Debug` shows only
//! the endpoint, region and service.

use bytes::Bytes;
use reqsign_aws_v4::{
    Credential, DefaultCredentialProvider, RequestSigner, StaticCredentialProvider,
};
use reqsign_core::{Context, OsEnv, Signer};
use sha2::{Digest, Sha256};
use std::fmt;
use std::time::Duration;

/// The Query API version every EC2 call names.
pub const EC2_VERSION: &str = "2016-11-15";
/// How long one HTTP exchange may take before it counts as lost.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// AWS answered with an error code (`RequestLimitExceeded`,
    /// `InvalidInstanceID.NotFound`, …).
    #[error("{code} (HTTP {status}): {message}")]
    Aws {
        /// AWS's error code.
        code: String,
        /// AWS's message.
        message: String,
        /// The HTTP status.
        status: u16,
    },
    /// No answer, or one that is not AWS's (a proxy's 502, a cut
    /// connection): the call may or may not have taken effect.
    #[error("no usable answer: {0}")]
    Transport(String),
    /// The request could not be signed (no credentials found, or expired).
    #[error("signing the request: {0}")]
    Signing(String),
}

impl ApiError {
    /// AWS's error code, if AWS answered.
    pub fn code(&self) -> Option<&str> {
        match self {
            ApiError::Aws { code, .. } => Some(code),
            _ => None,
        }
    }

    /// True for AWS's throttling answers.
    pub fn is_throttle(&self) -> bool {
        matches!(
            self.code(),
            Some("RequestLimitExceeded" | "Throttling" | "ThrottlingException")
        )
    }

    /// True for AWS's answers that the zone has no capacity for the
    /// request (sent as server errors, HTTP 5xx): the same launch in
    /// another zone may succeed, the same one again right away rarely does.
    pub fn is_capacity(&self) -> bool {
        matches!(
            self.code(),
            Some(
                "InsufficientInstanceCapacity"
                    | "InsufficientCapacity"
                    | "InsufficientHostCapacity"
                    | "InsufficientReservedInstanceCapacity"
            )
        )
    }

    /// True when the same call may succeed later: throttling, AWS's own
    /// failures (5xx) other than a lack of capacity, a lost answer.
    pub fn is_retryable(&self) -> bool {
        match self {
            ApiError::Aws { status, .. } => {
                self.is_throttle() || (*status >= 500 && !self.is_capacity())
            }
            ApiError::Transport(_) => true,
            ApiError::Signing(_) => false,
        }
    }
}

/// A signer for one AWS service in one region, at one endpoint.
#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    signer: Signer<Credential>,
    endpoint: String,
    region: String,
    service: String,
}

impl fmt::Debug for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Api")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("service", &self.service)
            .finish_non_exhaustive()
    }
}

/// Where credentials come from.
#[derive(Clone)]
pub enum Credentials {
    /// The standard AWS chain (what a deployment uses).
    Chain,
    /// A fixed key pair (the test kit's moto user).
    Static {
        /// The access key id.
        access_key: String,
        /// The secret key.
        secret_key: String,
    },
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Credentials::Chain => "Chain",
            Credentials::Static { .. } => "Static(..)",
        })
    }
}

impl Api {
    /// Calls `service` in `region` at `endpoint` (`https://ec2.REGION.amazonaws.com`
    /// unless overridden, e.g. for moto).
    pub fn new(
        service: &str,
        region: &str,
        endpoint: Option<&str>,
        credentials: Credentials,
    ) -> Api {
        let http = http_client(CALL_TIMEOUT);
        let ctx = Context::new()
            .with_file_read(reqsign_file_read_tokio::TokioFileRead)
            .with_http_send(reqsign_http_send_reqwest::ReqwestHttpSend::new(
                http.clone(),
            ))
            .with_env(OsEnv);
        let request_signer = RequestSigner::new(service, region);
        let signer = match credentials {
            Credentials::Chain => {
                Signer::new(ctx, DefaultCredentialProvider::new(), request_signer)
            }
            Credentials::Static {
                access_key,
                secret_key,
            } => Signer::new(
                ctx,
                StaticCredentialProvider::new(&access_key, &secret_key),
                request_signer,
            ),
        };
        let endpoint = endpoint
            .map(|e| e.trim_end_matches('/').to_string())
            .unwrap_or_else(|| default_endpoint(service, region));
        Api {
            http,
            signer,
            endpoint,
            region: region.to_string(),
            service: service.to_string(),
        }
    }

    /// The region calls are signed for.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// `Action` with `params` (EC2's `Version` added), signed: ready to
    /// [`send`](Self::send). Signing may first fetch credentials over the
    /// network (instance metadata, web identity, the container endpoint:
    /// up to the call timeout), so a caller that checks a fence signs
    /// first and checks right before sending (a signature stays valid for
    /// 5 minutes).
    pub async fn signed(
        &self,
        action: &str,
        params: &[(String, String)],
    ) -> Result<reqwest::Request, ApiError> {
        let body = Bytes::from(form(action, version(&self.service), params));
        let uri: http::Uri = format!("{}/", self.endpoint)
            .parse()
            .map_err(|e| ApiError::Transport(format!("endpoint {}: {e}", self.endpoint)))?;
        let host = uri.authority().map(|a| a.to_string()).unwrap_or_default();
        let (mut parts, ()) = http::Request::post(uri)
            .header(http::header::HOST, host)
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded; charset=utf-8",
            )
            // The payload's hash, which SigV4 signs (reqsign reads it here).
            .header("x-amz-content-sha256", hex::encode(Sha256::digest(&body)))
            .body(())
            .map_err(|e| ApiError::Transport(e.to_string()))?
            .into_parts();
        self.signer
            .sign(&mut parts, None)
            .await
            .map_err(|e| ApiError::Signing(e.to_string()))?;
        let req = http::Request::from_parts(parts, body);
        reqwest::Request::try_from(req).map_err(|e| ApiError::Transport(e.to_string()))
    }

    /// [`signed`](Self::signed), then [`send`](Self::send): for callers
    /// with no fence to check between the two.
    pub async fn call(
        &self,
        action: &str,
        params: &[(String, String)],
    ) -> Result<String, ApiError> {
        self.send(self.signed(action, params).await?).await
    }

    /// Sends a [`signed`](Self::signed) request: the answer's XML.
    pub async fn send(&self, req: reqwest::Request) -> Result<String, ApiError> {
        let resp = self
            .http
            .execute(req)
            .await
            .map_err(|e| ApiError::Transport(e.without_url().to_string()))?;
        let status = resp.status().as_u16();
        let text = resp
            .text()
            .await
            .map_err(|e| ApiError::Transport(e.without_url().to_string()))?;
        if (200..300).contains(&status) {
            return Ok(text);
        }
        match crate::xml::error(&text) {
            Some((code, message)) => Err(ApiError::Aws {
                code,
                message,
                status,
            }),
            None => Err(ApiError::Transport(format!(
                "HTTP {status} without an AWS error"
            ))),
        }
    }
}

/// An HTTP client on rustls with ring (already in the build for the
/// swarm adapters: reqwest's default would bring aws-lc, a C build of its
/// own), installed as the process's TLS provider if none is.
pub fn http_client(timeout: Duration) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .expect("an HTTP client with ring installed")
}

/// The form-encoded body of a Query API call.
fn form(action: &str, version: &str, params: &[(String, String)]) -> String {
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("Action", action);
    form.append_pair("Version", version);
    for (k, v) in params {
        form.append_pair(k, v);
    }
    form.finish()
}

fn default_endpoint(service: &str, region: &str) -> String {
    match service {
        "iam" => "https://iam.amazonaws.com".into(),
        _ => format!("https://{service}.{region}.amazonaws.com"),
    }
}

fn version(service: &str) -> &'static str {
    match service {
        "iam" => "2010-05-08",
        _ => EC2_VERSION,
    }
}
