//! Describe: every declared host asked for its record, all at once.
//!
//! Design rule 13: a host that does not answer is unknown, never gone.
//! It is listed from the record this process last read from it (running:
//! its state is not known to be stopped), so the planner neither replaces
//! nor forgets its member on silence; a host this process never read, or
//! last found free, makes the listing partial, and a partial listing is an
//! error, never a shorter list. A fresh listing (a new term's first look)
//! trusts only records: a host found free before may have been enrolled by
//! another controller since. Hosts only earlier revisions declare are not
//! waited for: the operator took them out of the inventory.

use crate::SshProvider;
use crate::inventory::Target;
use crate::link::RunError;
use crate::record::{Answer, Record, Silence};
use crate::script;
use drover_core::model::Instance;
use drover_spi::ProviderError;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long reading one record may take.
pub const READ_WITHIN: Duration = Duration::from_secs(20);

/// What a host answered last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// This record.
    Record(Record),
    /// No record.
    Free,
}

/// One enrolled host, as listed.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The host.
    pub target: Target,
    /// Its record.
    pub record: Record,
    /// False when it did not answer now (listed from the last record read).
    pub answered: bool,
}

impl SshProvider {
    /// What host `t` answers now (remembered as its last answer).
    pub(crate) async fn ask(&self, t: &Target) -> Answer {
        let read = script::read_record(&t.login.host.state_dir);
        let answer = match self.links.run(t, &read, b"", READ_WITHIN).await {
            Ok(ran) if ran.ok() && ran.stdout.trim() == script::FREE => Answer::Free,
            Ok(ran) if ran.ok() => match Record::parse(&ran.stdout) {
                Some(r) => Answer::Enrolled(r),
                None => {
                    tracing::warn!(host = %t.name(), "the host's record is not one this drover reads: the host counts as taken");
                    Answer::Unreadable
                }
            },
            // Reading failed on the host (sudo refused, say): the
            // operator's to fix.
            Ok(ran) => Answer::Silent(Silence {
                why: format!(
                    "host {}: reading its record failed (status {:?}): {}",
                    t.name(),
                    ran.status,
                    ran.stderr.trim()
                ),
                lasting: true,
            }),
            Err(e) => Answer::Silent(Silence {
                why: e.to_string(),
                lasting: !e.is_transient(),
            }),
        };
        self.remember(&t.name(), &answer);
        answer
    }

    /// Remembers `name`'s answer (a silent host's last answer is kept).
    pub(crate) fn remember(&self, name: &str, answer: &Answer) {
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match answer {
            Answer::Free => {
                seen.insert(name.to_string(), Seen::Free);
            }
            Answer::Enrolled(r) => {
                seen.insert(name.to_string(), Seen::Record(r.clone()));
            }
            Answer::Unreadable => {
                seen.remove(name);
            }
            // Never a read's answer (a claim's finding): nothing to keep.
            Answer::Silent(_) | Answer::InSwarm(_) => {}
        }
    }

    /// Every declared host, as it can be known now.
    pub(crate) async fn targets(&self) -> Result<Vec<Target>, ProviderError> {
        let declared = self
            .inventory
            .declared()
            .await
            .map_err(ProviderError::Transient)?;
        Ok(declared.targets())
    }

    /// Every enrolled host (see the module's rules); `fresh` for a look a
    /// new term decides by.
    pub(crate) async fn listing(&self, fresh: bool) -> Result<Vec<Listed>, ProviderError> {
        let targets = self.targets().await?;
        let answers = futures_util::future::join_all(targets.iter().map(|t| self.ask(t))).await;
        let mut listed = Vec::new();
        let mut unknown = Vec::new();
        for (target, answer) in targets.into_iter().zip(answers) {
            let why = match answer {
                Answer::Enrolled(record) => {
                    listed.push(Listed {
                        target,
                        record,
                        answered: true,
                    });
                    continue;
                }
                Answer::Free | Answer::Unreadable | Answer::InSwarm(_) => continue,
                Answer::Silent(s) => s.why,
            };
            if !target.current {
                continue;
            }
            let last = self
                .seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(&target.name())
                .cloned();
            match last {
                Some(Seen::Record(record)) => listed.push(Listed {
                    target,
                    record,
                    answered: false,
                }),
                Some(Seen::Free) if !fresh => {}
                _ => unknown.push(why),
            }
        }
        if unknown.is_empty() {
            Ok(listed)
        } else {
            Err(ProviderError::Transient(format!(
                "the ssh inventory's listing is partial: {}; what they hold is unknown, so nothing is concluded until they answer (or are taken out of instance.properties.hosts)",
                unknown.join("; ")
            )))
        }
    }

    /// The instances carrying all of `tags`.
    pub(crate) async fn instances(
        &self,
        tags: &BTreeMap<String, String>,
        fresh: bool,
    ) -> Result<Vec<Instance>, ProviderError> {
        let listed = self.listing(fresh).await?;
        Ok(listed
            .iter()
            .filter(|l| l.record.matches(tags))
            .map(|l| l.record.instance())
            .collect())
    }

    /// The declared host holding (or last holding) enrollment `id`, and
    /// its record as it answers now: `NotFound` when it holds another or
    /// none.
    pub(crate) async fn enrollment(&self, id: &str) -> Result<(Target, Record), ProviderError> {
        let t = self.target_of(id).await?;
        match self.ask(&t).await {
            Answer::Enrolled(r) if r.id == id => Ok((t, r)),
            Answer::Silent(s) if s.lasting => Err(ProviderError::Permanent(s.why)),
            Answer::Silent(s) => Err(ProviderError::Transient(s.why)),
            _ => Err(ProviderError::NotFound(format!(
                "host {} holds no enrollment {id}",
                t.name()
            ))),
        }
    }

    /// The declared host of instance `id`.
    pub(crate) async fn target_of(&self, id: &str) -> Result<Target, ProviderError> {
        let name = crate::record::host_of(id)
            .ok_or_else(|| ProviderError::NotFound(format!("{id} is no ssh instance id")))?;
        self.targets()
            .await?
            .into_iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| {
                ProviderError::Permanent(format!(
                    "host {name} (of instance {id}) is in no ssh inventory of the cluster: drover cannot log in to it; list it again in instance.properties.hosts"
                ))
            })
    }
}

/// A failed command on a host as the provider's caller must treat it:
/// a host that may answer later is transient, a refused login is not.
pub(crate) fn run_error(what: &str, e: RunError) -> ProviderError {
    match e.is_transient() {
        true => ProviderError::Transient(format!("{what}: {e}")),
        false => ProviderError::Permanent(format!("{what}: {e}")),
    }
}
