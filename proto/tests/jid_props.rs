//! Property tests of the JID parser: no input panics it, whatever it accepts prints back to an id it
//! accepts again unchanged, and every well-formed id of each kind is accepted.

use proptest::prelude::*;
use wagate_proto::Jid;

proptest! {
    #[test]
    fn parsing_never_panics_and_accepted_ids_round_trip(raw in any::<String>()) {
        if let Ok(jid) = Jid::parse(&raw) {
            let printed = jid.to_string();
            prop_assert_eq!(Jid::parse(&printed), Ok(jid.clone()));
            let json = serde_json::to_string(&jid).expect("a Jid serialises");
            prop_assert_eq!(serde_json::from_str::<Jid>(&json).ok(), Some(jid));
        }
    }

    #[test]
    fn near_misses_never_panic(raw in "[0-9a-z@.+ -]{0,80}") {
        if let Ok(jid) = Jid::parse(&raw) {
            prop_assert_eq!(Jid::parse(&jid.to_string()), Ok(jid));
        }
        let _ = Jid::from_phone(&raw);
    }

    #[test]
    fn well_formed_ids_of_every_kind_are_accepted(
        number in "[0-9]{1,64}",
        group in "[0-9][0-9-]{0,63}",
        channel in "[a-zA-Z0-9]{1,64}",
    ) {
        for raw in [
            format!("{number}@c.us"),
            format!("{number}@lid"),
            format!("{group}@g.us"),
            format!("{channel}@newsletter"),
        ] {
            let jid = Jid::parse(&raw);
            prop_assert_eq!(jid.map(|j| j.to_string()), Ok(raw));
        }
        let normalised = Jid::parse(&format!("{number}@s.whatsapp.net")).map(|j| j.to_string());
        prop_assert_eq!(normalised, Ok(format!("{number}@c.us")));
    }

    #[test]
    fn bare_numbers_become_individual_ids(digits in "[0-9]{6,15}", plus in any::<bool>()) {
        let raw = if plus { format!("+{digits}") } else { digits.clone() };
        let jid = Jid::from_phone(&raw).map(|j| j.to_string());
        prop_assert_eq!(jid, Ok(format!("{digits}@c.us")));
    }
}
