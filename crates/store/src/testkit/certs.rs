//! Throwaway TLS material for an engine on loopback, made with `openssl`
//! and laid out as dockerd's `--tls*` flags and the docker CLI's
//! `DOCKER_CERT_PATH` expect.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A CA, a server certificate for one IP and a client certificate.
pub struct TestCerts {
    /// `ca.pem`, `cert.pem`, `key.pem` for dockerd (`--tlscacert` …).
    pub server: PathBuf,
    /// `ca.pem`, `cert.pem`, `key.pem` for the client (`DOCKER_CERT_PATH`).
    pub client: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A P-256 key and a certificate for `cn` with `ext` (X.509 v3
/// extensions, one per line), signed by the CA in `dir`.
fn issue(dir: &Path, out: &str, cn: &str, ext: &str, serial: &str) {
    std::fs::create_dir_all(dir.join(out)).unwrap();
    std::fs::write(dir.join(format!("{out}.ext")), ext).unwrap();
    let (key, csr, cert) = (
        format!("{out}/key.pem"),
        format!("{out}.csr"),
        format!("{out}/cert.pem"),
    );
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            &format!("/CN={cn}"),
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca-key.pem",
            "-set_serial",
            serial,
            "-days",
            "2",
            "-out",
            &cert,
            "-extfile",
            &format!("{out}.ext"),
        ],
    );
    std::fs::copy(dir.join("ca.pem"), dir.join(out).join("ca.pem")).unwrap();
}

impl TestCerts {
    /// Makes a CA, a server certificate for `ip` and a client certificate in `dir`.
    pub fn generate(dir: &Path, ip: &str) -> TestCerts {
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                "ca-key.pem",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=drover test CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        );
        issue(
            dir,
            "server",
            ip,
            &format!("subjectAltName=IP:{ip}\nextendedKeyUsage=serverAuth\n"),
            "2",
        );
        issue(
            dir,
            "client",
            "drover",
            "extendedKeyUsage=clientAuth\n",
            "3",
        );
        TestCerts {
            server: dir.join("server"),
            client: dir.join("client"),
        }
    }
}
