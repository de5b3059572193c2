//! Webhook body signatures: `X-Wagate-Signature: sha256=<lowercase hex HMAC-SHA256(secret, raw body)>`.
//! Input: the webhook's secret and the exact bytes that go on the wire. It does not build or send requests.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The `X-Wagate-Signature` header value for `body` under `secret`.
pub fn signature_header(secret: &str, body: &[u8]) -> String {
    // HMAC accepts keys of any length (long keys are hashed first), so this never fails; an empty fallback
    // keeps the function total without a panic path.
    let Ok(mut mac) = HmacSha256::new_from_slice(secret.as_bytes()) else {
        return String::new();
    };
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Whether `header` is the valid signature of `body` under `secret` (constant-time comparison).
pub fn verify(secret: &str, body: &[u8], header: &str) -> bool {
    let Some(hex_sig) = header.strip_prefix("sha256=") else {
        return false;
    };
    let Ok(sig) = hex::decode(hex_sig) else {
        return false;
    };
    let Ok(mut mac) = HmacSha256::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&sig).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_matches_openssl_reference() {
        // echo -n '{"a":1}' | openssl dgst -sha256 -hmac 'secret-0123456789'
        assert_eq!(
            signature_header("secret-0123456789", br#"{"a":1}"#),
            "sha256=9a873f77aee75db6dc7b4b9e228cc7abe5a2d15f755fe81c4a457d40ef415650"
        );
    }

    #[test]
    fn verify_accepts_own_signature_and_rejects_tampering() {
        let sig = signature_header("k".repeat(16).as_str(), b"body");
        assert!(verify(&"k".repeat(16), b"body", &sig));
        assert!(!verify(&"k".repeat(16), b"body ", &sig));
        assert!(!verify(&"k".repeat(16), b"body", "sha256=zz"));
    }
}
