//! An EC2 instance's boot log: its console output (`GetConsoleOutput`,
//! base64 in the answer; EC2 keeps its last 64 KiB, posted shortly after
//! boot), its tail redacted here before it leaves the adapter
//! ([`InstanceProvider::boot_log`](drover_spi::InstanceProvider::boot_log)).
//! Where the image writes cloud-init's output to the console (the usual
//! Linux images do), the boot script's own lines are there.

use crate::{Ec2Provider, parse, provider_error};
use base64::Engine;
use drover_core::boot::BootLog;
use drover_spi::ProviderError;
use serde::Deserialize;

/// `GetConsoleOutputResponse`, the part read.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConsoleOutput {
    /// The console output, base64; absent until EC2 posted some.
    #[serde(default)]
    output: Option<String>,
}

impl Ec2Provider {
    /// The tail of instance `id`'s console output; `None` while EC2 has
    /// posted none.
    pub(crate) async fn console_log(&self, id: &str) -> Result<Option<BootLog>, ProviderError> {
        let params = [("InstanceId".to_string(), id.to_string())];
        let text = self
            .client
            .call("GetConsoleOutput", &params, None)
            .await
            .map_err(provider_error)?;
        let answer: ConsoleOutput = parse("GetConsoleOutput", &text).map_err(provider_error)?;
        Ok(answer
            .output
            .filter(|o| !o.trim().is_empty())
            .map(|o| BootLog::tail(&decode(&o))))
    }
}

/// The console text of EC2's base64 (its line breaks ignored); bytes that
/// are not UTF-8 are shown replaced. Not base64: shown as it came.
fn decode(b64: &str) -> String {
    let packed: String = b64.chars().filter(|c| !c.is_whitespace()).collect();
    match base64::engine::general_purpose::STANDARD.decode(packed) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => b64.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_output_is_decoded_and_redacted() {
        let raw = "boot\njoin --token SWMTKN-1-abc failed: connection refused\n";
        let b64 = base64::engine::general_purpose::STANDARD.encode(raw);
        let wrapped = format!("{}\n{}", &b64[..10], &b64[10..]);
        let answer: ConsoleOutput = crate::xml::parse(&format!(
            "<GetConsoleOutputResponse><instanceId>i-1</instanceId><output>{wrapped}</output></GetConsoleOutputResponse>"
        ))
        .unwrap();
        let tail = BootLog::tail(&decode(&answer.output.unwrap()));
        assert_eq!(
            tail.lines(),
            ["boot", "join --token <redacted> failed: connection refused"]
        );
    }
}
