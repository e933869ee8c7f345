//! Unit tests of the local provider (pools, ids, the listing).

use super::*;

/// Issue 37: the listing reads the provider's own records, so an empty
/// pet slot is filled without waiting (`plan::stage::fill`).
#[test]
fn its_listing_is_complete() {
    let d = std::env::temp_dir().join(format!("drover-listing-{}", std::process::id()));
    let p = LocalProvider::new(&d, []).unwrap();
    assert!(p.listing_is_complete());
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn pool_is_loopback_only() {
    assert_eq!(parse_pool("127.0.5.10-127.0.5.12").unwrap().len(), 3);
    assert!(matches!(
        parse_pool("10.0.0.1"),
        Err(LocalError::NotLoopback(_))
    ));
    assert!(matches!(
        parse_pool("127.0.0.9-127.0.0.1"),
        Err(LocalError::BadPool(_))
    ));
    let d = std::env::temp_dir().join(format!("drover-pool-{}", std::process::id()));
    let e = LocalProvider::new(&d, ["192.168.1.1".parse().unwrap()]).unwrap_err();
    assert!(e.to_string().contains("not a loopback"), "{e}");
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn ids_are_checked() {
    assert!(valid_id("i0123abcd"));
    assert!(!valid_id("../etc"));
    assert!(!valid_id(""));
}
