//! Limits a provider cannot go past, checked by `validate` at their exact
//! bound: the local provider's one process argument per engine label, and
//! EC2's user-data size (with what the provider adds kept free). The
//! files are built here: a corpus file holding a 128 KiB label would be
//! unreadable.

use drover_core::spec::ec2::{BOOT_ENV_RESERVE, USER_DATA_LIMIT};
use drover_core::spec::local::{MAX_ARG_STRLEN, MAX_LABEL_ARGS};
use drover_core::spec::{Severity, load_bytes};

/// The errors of `file`, as `path: message`.
fn errors(file: &str) -> Vec<String> {
    load_bytes(file.as_bytes())
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| format!("{}: {}", d.path, d.message))
        .collect()
}

fn labelled(provider: &str, labels: &[(&str, usize)]) -> String {
    let labels: Vec<String> = labels
        .iter()
        .map(|(k, len)| format!("{k}: {}", "v".repeat(*len)))
        .collect();
    format!(
        "groups:\n- name: w\n  role: worker\n  allocation: {{size: 1}}\n  instance: {{provider: {provider}}}\n  flavor:\n    engine_labels: {{{}}}\n",
        labels.join(", ")
    )
}

#[test]
fn a_local_label_holds_at_most_one_process_argument() {
    // `big=` and the value, and the argument's NUL: MAX_ARG_STRLEN at most.
    let fits = MAX_ARG_STRLEN - "big=".len() - 1;
    assert_eq!(
        errors(&labelled("local", &[("big", fits)])),
        Vec::<String>::new()
    );
    let over = errors(&labelled("local", &[("big", fits + 1), ("small", 3)]));
    assert_eq!(over.len(), 1, "{over:?}");
    assert!(
        over[0]
            .starts_with("groups[0].flavor.engine_labels.big: engine label `big` is 131072 bytes"),
        "{over:?}"
    );
    // Another provider carries labels otherwise (daemon.json, user data).
    assert_eq!(
        errors(&labelled("sim", &[("big", fits + 1)])),
        Vec::<String>::new()
    );
}

#[test]
fn all_local_labels_together_fit_one_command_line() {
    // One value, written once (a file is at most 1 MiB) and aliased.
    let n = MAX_LABEL_ARGS / 100_000 + 1;
    let mut labels = format!("k0: &v {}", "v".repeat(100_000));
    for i in 1..n {
        labels += &format!(", k{i}: *v");
    }
    let file = format!(
        "groups:\n- name: w\n  role: worker\n  allocation: {{size: 1}}\n  instance: {{provider: local}}\n  flavor:\n    engine_labels: {{{labels}}}\n"
    );
    let e = errors(&file);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("groups[0].flavor.engine_labels: the engine labels are"),
        "{e:?}"
    );
}

fn ec2_script(len: usize) -> String {
    let head = "#!/bin/sh\n#";
    format!(
        "groups:\n- name: w\n  role: worker\n  allocation: {{size: 1}}\n  instance:\n    provider: ec2\n    properties: {{region: eu-west-1, image_id: ami-0123456789abcdef0, instance_type: t3.micro}}\n  flavor:\n    boot_script: \"#!/bin/sh\\n#{}\"\n",
        "x".repeat(len - head.len())
    )
}

#[test]
fn ec2_user_data_keeps_room_for_the_boot_environment() {
    let most = USER_DATA_LIMIT - BOOT_ENV_RESERVE;
    assert_eq!(errors(&ec2_script(most)), Vec::<String>::new());
    let e = errors(&ec2_script(most + 1));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with(&format!(
            "groups[0].flavor.boot_script: renders to {} bytes; with the 1024 bytes kept",
            most + 1
        )),
        "{e:?}"
    );
    assert!(e[0].contains("16384"), "{e:?}");
}
