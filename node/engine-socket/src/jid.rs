//! JID conversion between the gateway's wire form (`<number>@c.us`, `wagate_proto::Jid`) and the
//! library's (`<number>@s.whatsapp.net`, `whatsapp_rust::Jid`). Every value crossing the engine seam
//! goes through here, so the `c.us` / `s.whatsapp.net` spelling is decided in one place.

use std::str::FromStr;

use wagate_proto::Jid as WireJid;
use whatsapp_rust::Jid;

/// The library's JID for a gateway JID. `None` only for a form the library cannot parse (a gateway
/// `Jid` is already validated, so that means the two grammars disagree).
pub fn to_wa(jid: &WireJid) -> Option<Jid> {
    let server = match jid.server() {
        "c.us" => "s.whatsapp.net",
        other => other,
    };
    Jid::from_str(&format!("{}@{server}", jid.user())).ok()
}

/// The gateway's JID for a library JID, device and agent dropped (`None` for servers the gateway does
/// not name, such as `@bot` or `@hosted`).
pub fn from_wa(jid: &Jid) -> Option<WireJid> {
    let bare = jid.to_non_ad();
    WireJid::parse(&format!("{}@{}", bare.user, bare.server)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn individual_jids_swap_c_us_and_s_whatsapp_net() {
        let wire = WireJid::parse("4915112345678@c.us").ok();
        let wa = wire.as_ref().and_then(to_wa);
        assert_eq!(
            wa.as_ref().map(|j| j.to_string()).as_deref(),
            Some("4915112345678@s.whatsapp.net")
        );
        assert_eq!(wa.as_ref().and_then(from_wa), wire);
    }

    #[test]
    fn groups_channels_and_lids_keep_their_server() {
        for raw in [
            "120363025246125888@g.us",
            "120363999999999999@newsletter",
            "123456789012345@lid",
        ] {
            let wire = WireJid::parse(raw).ok();
            let wa = wire.as_ref().and_then(to_wa);
            assert_eq!(wa.as_ref().map(|j| j.to_string()).as_deref(), Some(raw));
            assert_eq!(wa.as_ref().and_then(from_wa), wire);
        }
    }

    #[test]
    fn a_device_jid_maps_to_its_account() {
        let device = Jid::from_str("4915112345678:3@s.whatsapp.net").ok();
        let wire = device.as_ref().and_then(from_wa).map(|j| j.to_string());
        assert_eq!(wire.as_deref(), Some("4915112345678@c.us"));
    }
}
