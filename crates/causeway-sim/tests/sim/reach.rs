//! The clock guard's walk finds the timestamps of every protocol's
//! messages: if it missed them, the runtime's guard would let a poisoned
//! timestamp through and the simulator's reach check would pass for
//! nothing.

use bytes::Bytes;
use causeway_protocol::contract::newest_timestamp;
use causeway_protocol::cure::CureMsg;
use causeway_protocol::ec::EcMsg;
use causeway_protocol::hlc::Timestamp;
use causeway_protocol::ids::TxId;
use causeway_protocol::recovery::Control;
use causeway_protocol::wren::WrenMsg;

#[test]
fn protocol_messages_show_their_newest_timestamp() {
    let t = Timestamp;
    let commit = WrenMsg::Commit { tx: TxId(u64::MAX), ct: t(40) };
    assert_eq!(newest_timestamp(&commit), t(40));
    assert_eq!(newest_timestamp(&WrenMsg::Heartbeat { t: t(41) }), t(41));
    assert_eq!(newest_timestamp(&WrenMsg::Stream(Control::Ack { upto: t(42) })), t(42));
    let prepare = WrenMsg::CommitReq {
        tx: TxId(1),
        hwt: t(43),
        writes: vec![(Bytes::from_static(b"k"), Some(Bytes::from_static(&[0xff; 16])))],
    };
    assert_eq!(newest_timestamp(&prepare), t(43));
    assert_eq!(newest_timestamp(&CureMsg::Heartbeat { t: t(44) }), t(44));
    assert_eq!(
        newest_timestamp(&EcMsg::Stream(Control::Ack { upto: 45 })),
        Timestamp::ZERO,
        "EC's positions are counts"
    );
}
