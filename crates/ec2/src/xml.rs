//! EC2's XML answers, read with quick-xml's serde support: only the
//! fields drover uses (everything else is ignored), and AWS's error
//! documents (`<Response><Errors><Error><Code>…`, or IAM's
//! `<ErrorResponse><Error><Code>…`).

use quick_xml::events::Event;
use serde::Deserialize;
use std::collections::BTreeMap;

/// A list EC2 wraps in `<item>` elements.
#[derive(Debug, Deserialize)]
pub struct Items<T> {
    /// The items.
    #[serde(default = "Vec::new", rename = "item")]
    pub items: Vec<T>,
}

impl<T> Default for Items<T> {
    fn default() -> Self {
        Items { items: Vec::new() }
    }
}

/// `DescribeInstancesResponse`: one page.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DescribeInstances {
    /// Reservations, each with its instances. Required: EC2 always sends
    /// it (empty when nothing matches), so an answer without it (another
    /// service behind the endpoint, a proxy's page) is not read as "no
    /// instances".
    pub reservation_set: Items<Reservation>,
    /// The next page's token, if any.
    #[serde(default)]
    pub next_token: Option<String>,
}

/// One reservation (one `RunInstances`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    /// Its instances.
    #[serde(default)]
    pub instances_set: Items<Described>,
}

/// `RunInstancesResponse`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunInstances {
    /// The instances launched (one: drover asks for exactly one).
    #[serde(default)]
    pub instances_set: Items<Described>,
}

/// One instance, as `DescribeInstances` and `RunInstances` show it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Described {
    /// `i-…`.
    pub instance_id: String,
    /// Its state.
    pub instance_state: State,
    /// RFC 3339.
    #[serde(default)]
    pub launch_time: Option<String>,
    /// Its private IPv4 address (absent until EC2 gave it one).
    #[serde(default)]
    pub private_ip_address: Option<String>,
    /// Its tags.
    #[serde(default)]
    pub tag_set: Items<Tag>,
}

impl Described {
    /// Its tags as a map.
    pub fn tags(&self) -> BTreeMap<String, String> {
        self.tag_set
            .items
            .iter()
            .map(|t| (t.key.clone(), t.value.clone().unwrap_or_default()))
            .collect()
    }
}

/// An instance state (`pending`, `running`, `stopping`, `stopped`,
/// `shutting-down`, `terminated`).
#[derive(Debug, Deserialize)]
pub struct State {
    /// The state's name.
    pub name: String,
}

/// One tag.
#[derive(Debug, Deserialize)]
pub struct Tag {
    /// Its key.
    pub key: String,
    /// Its value (EC2 omits an empty one).
    #[serde(default)]
    pub value: Option<String>,
}

/// `TerminateInstancesResponse`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminateInstances {
    /// Each instance's state change.
    #[serde(default)]
    pub instances_set: Items<StateChange>,
}

/// One instance's state change.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateChange {
    /// `i-…`.
    pub instance_id: String,
    /// The state it is now in.
    pub current_state: State,
}

/// Reads `text` as `T`.
pub fn parse<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, quick_xml::DeError> {
    quick_xml::de::from_str(text)
}

/// The first error code and message of an AWS error document.
pub fn error(text: &str) -> Option<(String, String)> {
    let mut reader = quick_xml::Reader::from_str(text);
    let (mut code, mut message) = (None, None);
    let mut current: Option<String> = None;
    loop {
        match reader.read_event().ok()? {
            Event::Start(e) => current = Some(AsRef::<str>::as_ref(&e.name()).to_string()),
            Event::End(_) => current = None,
            Event::Text(t) => {
                let raw: &str = t.as_ref();
                let value = quick_xml::escape::unescape(raw).ok()?.into_owned();
                match current.as_deref() {
                    Some("Code") if code.is_none() => code = Some(value),
                    Some("Message") if message.is_none() => message = Some(value),
                    _ => {}
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Some((code?, message.unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_describe_page_is_read() {
        let page: DescribeInstances = parse(
            r#"<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
            <requestId>r</requestId><reservationSet><item><reservationId>r-1</reservationId>
            <instancesSet><item><instanceId>i-1</instanceId><instanceState><code>16</code>
            <name>running</name></instanceState><launchTime>2026-12-04T20:44:04.000Z</launchTime>
            <privateIpAddress>10.0.1.11</privateIpAddress><tagSet><item><key>drover.group</key>
            <value>g</value></item><item><key>empty</key></item></tagSet></item></instancesSet>
            </item></reservationSet><nextToken>more</nextToken></DescribeInstancesResponse>"#,
        )
        .unwrap();
        let i = &page.reservation_set.items[0].instances_set.items[0];
        assert_eq!(i.instance_id, "i-1");
        assert_eq!(i.instance_state.name, "running");
        assert_eq!(i.launch_time.as_deref(), Some("2026-12-04T20:44:04.000Z"));
        assert_eq!(i.tags()["drover.group"], "g");
        assert_eq!(i.tags()["empty"], "");
        assert_eq!(page.next_token.as_deref(), Some("more"));
        let empty: DescribeInstances =
            parse("<DescribeInstancesResponse><reservationSet/></DescribeInstancesResponse>")
                .unwrap();
        assert!(empty.reservation_set.items.is_empty());
        // Without the element it is no answer at all, never "no instances".
        assert!(parse::<DescribeInstances>("<DescribeInstancesResponse/>").is_err());
        assert!(parse::<DescribeInstances>("<html><body>proxy</body></html>").is_err());
    }

    #[test]
    fn both_error_documents_are_read() {
        let ec2 = "<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>slow down</Message></Error></Errors><RequestID>x</RequestID></Response>";
        assert_eq!(
            error(ec2),
            Some(("RequestLimitExceeded".into(), "slow down".into()))
        );
        let iam = "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>no</Message></Error></ErrorResponse>";
        assert_eq!(error(iam).unwrap().0, "AccessDenied");
        assert_eq!(error("<html>bad gateway</html>"), None);
    }
}
