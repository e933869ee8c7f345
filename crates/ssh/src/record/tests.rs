use super::*;

fn host(name: &str, zone: Option<&str>) -> SshHost {
    SshHost {
        host: name.into(),
        port: 22,
        user: "root".into(),
        zone: zone.map(str::to_string),
        advertise_address: name.into(),
        state_dir: "/var/lib/drover".into(),
    }
}

fn enrolled(group: &str) -> Answer {
    let tags = BTreeMap::from([(tags::GROUP.to_string(), group.to_string())]);
    Answer::Enrolled(Record::new(&host("x", None), tags, 7))
}

#[test]
fn a_record_reads_back_as_written_and_only_in_its_format() {
    let tags = BTreeMap::from([("drover.link".to_string(), "l1".to_string())]);
    let r = Record::new(&host("10.0.1.11", None), tags, 1_700_000_000_000);
    assert_eq!(host_of(&r.id), Some("10.0.1.11"));
    let text = r.to_text();
    assert!(
        text.ends_with('\n') && !text.trim().contains('\n'),
        "{text}"
    );
    assert!(text.contains(&format!("\"id\":\"{}\"", r.id)), "{text}");
    assert_eq!(Record::parse(&text), Some(r.clone()));
    let later = text.replace("\"drover\":1", "\"drover\":2");
    assert_eq!(
        Record::parse(&later),
        None,
        "a later format is never misread"
    );
    assert_eq!(Record::parse("not json"), None);
    let i = r.instance();
    assert!(i.running, "a record read is a running machine");
    assert_eq!(i.link(), Some("l1"));
    assert_eq!(i.created_ms, 1_700_000_000_000);
}

#[test]
fn each_enrollment_of_a_host_has_its_own_id() {
    let h = host("db-1.example.net", None);
    let (a, b) = (
        Record::new(&h, BTreeMap::new(), 0),
        Record::new(&h, BTreeMap::new(), 0),
    );
    assert_ne!(a.id, b.id);
    assert_eq!(host_of(&a.id), Some("db-1.example.net"));
    assert_eq!(host_of("10.0.1.11:2222-0a1b2c3d"), Some("10.0.1.11:2222"));
    assert_eq!(host_of("i-0003"), None);
    assert_eq!(host_of("-0a1b2c3d"), None);
}

#[test]
fn cattle_take_the_first_free_host_in_their_zone() {
    let hosts = [
        host("a1", Some("a")),
        host("b1", Some("b")),
        host("a2", Some("a")),
    ];
    let answers = [enrolled("web"), Answer::Free, Answer::Free];
    assert_eq!(
        choose(&hosts, &answers, None, None, &[]).unwrap().host,
        "b1"
    );
    assert_eq!(
        choose(&hosts, &answers, None, Some("a"), &[]).unwrap().host,
        "a2"
    );
    assert_eq!(
        choose(&hosts, &answers, None, None, &["b1".into()])
            .unwrap()
            .host,
        "a2",
        "a host whose claim failed is not tried again"
    );
    let none = choose(&hosts, &answers, None, Some("c"), &[]).unwrap_err();
    assert!(matches!(none, NoHost::Exhausted { refused: false, .. }));
}

#[test]
fn an_exhausted_inventory_says_host_by_host_why() {
    let hosts = [host("h1", None), host("h2", None), host("h3", None)];
    let answers = [
        enrolled("web"),
        Answer::Silent(Silence {
            why: "connection refused".into(),
            lasting: false,
        }),
        Answer::Unreadable,
    ];
    let e = choose(&hosts, &answers, None, None, &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no free host in the inventory; enrolled: h1 (group web), h3 (unreadable record); not answering: h2 (connection refused): add hosts to instance.properties.hosts, or lower the group's size"
    );
}

#[test]
fn a_pet_takes_its_own_host_or_none() {
    let hosts = [host("h1", None), host("h2", None)];
    let answers = [enrolled("db"), Answer::Free];
    assert_eq!(
        choose(&hosts, &answers, Some("h2"), None, &[])
            .unwrap()
            .host,
        "h2"
    );
    assert!(matches!(
        choose(&hosts, &answers, Some("h1"), None, &[]),
        Err(NoHost::PetTaken { .. })
    ));
    assert!(matches!(
        choose(&hosts, &answers, Some("h9"), None, &[]),
        Err(NoHost::NotInInventory(_))
    ));
    let silent = [
        Answer::Free,
        Answer::Silent(Silence {
            why: "timed out".into(),
            lasting: false,
        }),
    ];
    assert!(matches!(
        choose(&hosts, &silent, Some("h2"), None, &[]),
        Err(NoHost::PetSilent { .. })
    ));
}

#[test]
fn a_host_in_another_swarm_is_never_chosen_and_an_exhausted_inventory_names_it() {
    let hosts = [host("h1", None), host("h2", None)];
    let why = "host h1 is refused: its engine is already part of a swarm".to_string();
    let answers = [Answer::InSwarm(why.clone()), Answer::Free];
    // A pet's refused host is its slot's refusal: no other host is taken.
    assert_eq!(
        choose(&hosts, &answers, Some("h1"), None, &[]),
        Err(NoHost::PetRefused { why: why.clone() })
    );
    // Cattle go on to the next free host.
    assert_eq!(
        choose(&hosts, &answers, None, None, &[]).unwrap().host,
        "h2"
    );
    let e = choose(&hosts, &answers, None, None, &["h2".into()]).unwrap_err();
    let NoHost::Exhausted { why: said, refused } = e else {
        panic!("exhausted: {e:?}")
    };
    assert!(refused, "the operator's to fix");
    assert!(said.contains(&format!("; refused: {why}")), "{said}");
}
