//! `status.rebalance.reason` keeps its wire text: each known reason reads and writes as the
//! spec spells it, and a text this version does not know neither fails the status nor is
//! rewritten by it.

use mds_api::status::{ModelDeploymentScalerStatus, RebalanceReason};
use serde_json::json;

#[test]
fn every_known_reason_keeps_its_wire_text() {
    let known = [
        (RebalanceReason::ResourceExhausted, "ResourceExhausted"),
        (RebalanceReason::DonorRelease, "DonorRelease"),
        (RebalanceReason::ReceiverAcquire, "ReceiverAcquire"),
        (RebalanceReason::DonationAttempted, "DonationAttempted"),
        (RebalanceReason::NotApplicable, "RebalanceNotApplicable"),
        (RebalanceReason::Blocked, "RebalanceBlocked"),
    ];
    for (reason, text) in known {
        assert_eq!(serde_json::to_value(&reason).unwrap(), json!(text));
        assert_eq!(reason.as_str(), text);
        let read: RebalanceReason = serde_json::from_value(json!(text)).unwrap();
        assert_eq!(read, reason);
    }
}

#[test]
fn an_unknown_reason_reads_and_is_written_back_as_it_was() {
    let stored = json!({"rebalance": {"receiverRole": "decode", "donationAttempted": false,
        "reason": "SomethingNewer"}});
    let status: ModelDeploymentScalerStatus = serde_json::from_value(stored.clone()).unwrap();
    let reason = status.rebalance.as_ref().unwrap().reason.clone();
    assert_eq!(
        reason,
        Some(RebalanceReason::Other("SomethingNewer".into()))
    );
    assert_eq!(reason.unwrap().as_str(), "SomethingNewer");
    assert_eq!(serde_json::to_value(&status).unwrap(), stored);
}

#[test]
fn the_schema_still_says_an_optional_string() {
    let schema = schemars::schema_for!(mds_api::status::RebalanceStatus);
    let properties = &schema.as_value()["properties"];
    let reason = &properties["reason"];
    assert_eq!(
        reason["type"], properties["receiverRole"]["type"],
        "{reason}"
    );
    assert!(
        reason.get("enum").is_none() && reason.get("anyOf").is_none(),
        "{reason}"
    );
}
