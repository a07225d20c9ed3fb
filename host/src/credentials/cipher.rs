//! The operator's key and the authenticated cipher every stored credential record is sealed
//! with: AES-256-GCM (aws-lc-rs, the crypto library rustls already links) under a random
//! 96-bit nonce per record, with associated data that binds the record's kind and its place
//! (caller key, provider or id): a record copied to another caller, provider or kind does not
//! open. A second, previous key may be given for rotation: records sealed under it still open,
//! and the next write seals them under the current one.
//!
//! Sealed layout: `0x01 | key id (8 bytes: SHA-256 of the key) | nonce (12) | ciphertext | tag (16)`.

use std::fmt;
use std::path::Path;

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use sha2::{Digest as _, Sha256};
use zeroize::Zeroizing;

/// The format byte of a sealed record.
const VERSION: u8 = 1;
/// The bytes before the ciphertext.
const HEADER: usize = 1 + 8 + NONCE_LEN;
/// The associated data's prefix: what the bytes are, and the layout's version.
const AAD_PREFIX: &[u8] = b"mcpbox-credential\x01";

/// What a sealed record is, part of its associated data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A caller's link to a provider (tokens).
    Link,
    /// A pending link request (a ticket).
    Ticket,
    /// The caller's pending ticket for a provider.
    Pending,
    /// An authorization flow in progress (state, PKCE verifier).
    Flow,
}

impl Kind {
    fn tag(self) -> &'static [u8] {
        match self {
            Self::Link => b"link",
            Self::Ticket => b"ticket",
            Self::Pending => b"pending",
            Self::Flow => b"flow",
        }
    }
}

/// Why a key could not be read or a record could not be opened. Never holds key material or
/// plaintext.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CipherError {
    /// The key file or value is unusable.
    #[error("{0}")]
    Key(String),
    /// The record was not sealed under a known key, or for this place, or was altered.
    #[error("a stored credential record does not open: {0}")]
    Open(&'static str),
}

/// A 32-byte key.
#[derive(Clone)]
pub struct Key(Zeroizing<[u8; 32]>);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// Parse a key: 32 bytes as base64 (standard or URL-safe, padded or not) or 64 hex digits,
    /// surrounding whitespace ignored.
    pub fn parse(text: &str) -> Result<Self, CipherError> {
        use base64::Engine as _;
        let text = text.trim();
        let bytes = Zeroizing::new(
            if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
                hex::decode(text).map_err(|_| CipherError::Key("not hex".to_owned()))?
            } else {
                let engines = [
                    base64::engine::general_purpose::STANDARD,
                    base64::engine::general_purpose::STANDARD_NO_PAD,
                    base64::engine::general_purpose::URL_SAFE,
                    base64::engine::general_purpose::URL_SAFE_NO_PAD,
                ];
                engines
                    .iter()
                    .find_map(|engine| engine.decode(text).ok())
                    .ok_or_else(|| {
                        CipherError::Key(
                            "a credentials key is 32 bytes as base64, or 64 hex digits \
                         (`mcpbox credentials keygen` makes one)"
                                .to_owned(),
                        )
                    })?
            },
        );
        let key: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
            CipherError::Key(format!(
                "a credentials key is 32 bytes; this one is {} (`mcpbox credentials keygen` \
                 makes one)",
                bytes.len()
            ))
        })?;
        Ok(Self(Zeroizing::new(key)))
    }

    /// Read a key file: owned by this user and readable by nobody else (as the secrets file).
    pub fn read(file: &Path) -> Result<Self, CipherError> {
        let fail =
            |m: String| CipherError::Key(format!("credentials key file {}: {m}", file.display()));
        crate::policy::config::check_private(file).map_err(fail)?;
        let text = Zeroizing::new(
            std::fs::read_to_string(file).map_err(|e| fail(format!("cannot read it: {e}")))?,
        );
        Self::parse(&text).map_err(|e| fail(e.to_string()))
    }

    /// A new random key, as base64 (what `mcpbox credentials keygen` prints).
    pub fn generate() -> Result<String, CipherError> {
        use base64::Engine as _;
        let mut key = Zeroizing::new([0u8; 32]);
        aws_lc_rs::rand::fill(key.as_mut_slice())
            .map_err(|_| CipherError::Key("the system's random source failed".to_owned()))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(key.as_slice()))
    }

    fn id(&self) -> [u8; 8] {
        let digest = Sha256::digest(self.0.as_slice());
        let mut id = [0u8; 8];
        id.copy_from_slice(&digest[..8]);
        id
    }

    fn aead(&self) -> Result<LessSafeKey, CipherError> {
        UnboundKey::new(&AES_256_GCM, self.0.as_slice())
            .map(LessSafeKey::new)
            .map_err(|_| CipherError::Key("the key does not fit AES-256-GCM".to_owned()))
    }
}

/// Seals and opens credential records.
pub struct Cipher {
    current: (LessSafeKey, [u8; 8]),
    previous: Option<(LessSafeKey, [u8; 8])>,
}

impl fmt::Debug for Cipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cipher")
            .field("previous", &self.previous.is_some())
            .finish_non_exhaustive()
    }
}

impl Cipher {
    /// Seal under `current`; open under it or `previous`.
    pub fn new(current: &Key, previous: Option<&Key>) -> Result<Self, CipherError> {
        Ok(Self {
            current: (current.aead()?, current.id()),
            previous: match previous {
                Some(key) => Some((key.aead()?, key.id())),
                None => None,
            },
        })
    }

    /// Seal `plain` as a record of `kind` at `parts` (caller key, provider or id).
    pub fn seal(&self, kind: Kind, parts: &[&str], plain: &[u8]) -> Result<Vec<u8>, CipherError> {
        let mut nonce = [0u8; NONCE_LEN];
        aws_lc_rs::rand::fill(&mut nonce)
            .map_err(|_| CipherError::Key("the system's random source failed".to_owned()))?;
        let (key, id) = &self.current;
        let mut out = Vec::with_capacity(HEADER + plain.len() + AES_256_GCM.tag_len());
        out.push(VERSION);
        out.extend_from_slice(id);
        out.extend_from_slice(&nonce);
        let mut body = plain.to_vec();
        let sealed = key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad(kind, parts)),
            &mut body,
        );
        if sealed.is_err() {
            zeroize::Zeroize::zeroize(&mut body);
            return Err(CipherError::Key("sealing failed".to_owned()));
        }
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// Open a record sealed by [`Cipher::seal`] with the same `kind` and `parts`.
    pub fn open(
        &self,
        kind: Kind,
        parts: &[&str],
        sealed: &[u8],
    ) -> Result<Zeroizing<Vec<u8>>, CipherError> {
        if sealed.len() < HEADER + AES_256_GCM.tag_len() || sealed[0] != VERSION {
            return Err(CipherError::Open("not a sealed record"));
        }
        let id = &sealed[1..9];
        let key = [Some(&self.current), self.previous.as_ref()]
            .into_iter()
            .flatten()
            .find(|(_, key_id)| key_id.as_slice() == id)
            .map(|(key, _)| key)
            .ok_or(CipherError::Open(
                "it was sealed under another key (neither the current nor the previous one)",
            ))?;
        let nonce = Nonce::try_assume_unique_for_key(&sealed[9..HEADER])
            .map_err(|_| CipherError::Open("not a sealed record"))?;
        let mut body = Zeroizing::new(sealed[HEADER..].to_vec());
        let len = key
            .open_in_place(nonce, Aad::from(aad(kind, parts)), &mut body)
            .map_err(|_| {
                CipherError::Open("it was altered, or belongs to another caller or provider")
            })?
            .len();
        body.truncate(len);
        Ok(body)
    }

    /// Whether `sealed` was sealed under the previous key (so it is worth sealing again).
    pub fn is_previous(&self, sealed: &[u8]) -> bool {
        sealed.len() > 9
            && self
                .previous
                .as_ref()
                .is_some_and(|(_, id)| id.as_slice() == &sealed[1..9])
    }
}

/// The associated data: the prefix, the kind, then each part with its length before it.
fn aad(kind: Kind, parts: &[&str]) -> Vec<u8> {
    let mut aad = AAD_PREFIX.to_vec();
    let tag = kind.tag();
    aad.extend_from_slice(&(tag.len() as u64).to_be_bytes());
    aad.extend_from_slice(tag);
    for part in parts {
        aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
        aad.extend_from_slice(part.as_bytes());
    }
    aad
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cipher() -> Cipher {
        let key = Key::parse(&Key::generate().expect("key")).expect("parses");
        Cipher::new(&key, None).expect("cipher")
    }

    #[test]
    fn a_record_round_trips() {
        let cipher = cipher();
        let sealed = cipher
            .seal(Kind::Link, &["token:alice", "github"], b"gho_secret")
            .expect("seals");
        let opened = cipher
            .open(Kind::Link, &["token:alice", "github"], &sealed)
            .expect("opens");
        assert_eq!(opened.as_slice(), b"gho_secret");
        // A fresh nonce each time: the same record seals to different bytes.
        let again = cipher
            .seal(Kind::Link, &["token:alice", "github"], b"gho_secret")
            .expect("seals");
        assert_ne!(sealed, again);
    }

    #[test]
    fn a_record_moved_to_another_caller_provider_or_kind_does_not_open() {
        let cipher = cipher();
        let sealed = cipher
            .seal(Kind::Link, &["token:alice", "github"], b"gho_secret")
            .expect("seals");
        for (kind, parts) in [
            (Kind::Link, ["token:bob", "github"]),
            (Kind::Link, ["token:alice", "gitlab"]),
            (Kind::Ticket, ["token:alice", "github"]),
            // The parts are length-prefixed: moving the boundary is another place.
            (Kind::Link, ["token:alicegit", "hub"]),
        ] {
            assert_eq!(
                cipher.open(kind, &parts, &sealed).err(),
                Some(CipherError::Open(
                    "it was altered, or belongs to another caller or provider"
                )),
                "{kind:?} {parts:?}"
            );
        }
    }

    #[test]
    fn tampering_fails_and_another_key_is_named() {
        let cipher = cipher();
        let parts = ["token:alice", "github"];
        let sealed = cipher
            .seal(Kind::Link, &parts, b"gho_secret")
            .expect("seals");
        for at in [HEADER, sealed.len() - 1, 10] {
            let mut altered = sealed.clone();
            altered[at] ^= 1;
            assert!(
                cipher.open(Kind::Link, &parts, &altered).is_err(),
                "byte {at}"
            );
        }
        assert!(cipher.open(Kind::Link, &parts, &sealed[..HEADER]).is_err());
        let other = self::cipher();
        assert_eq!(
            other.open(Kind::Link, &parts, &sealed).err(),
            Some(CipherError::Open(
                "it was sealed under another key (neither the current nor the previous one)"
            ))
        );
    }

    #[test]
    fn a_previous_key_still_opens_for_rotation() {
        let old = Key::parse(&Key::generate().expect("key")).expect("parses");
        let new = Key::parse(&Key::generate().expect("key")).expect("parses");
        let before = Cipher::new(&old, None).expect("cipher");
        let sealed = before
            .seal(Kind::Link, &["local", "github"], b"t")
            .expect("seals");
        let after = Cipher::new(&new, Some(&old)).expect("cipher");
        assert!(after.is_previous(&sealed));
        assert_eq!(
            after
                .open(Kind::Link, &["local", "github"], &sealed)
                .expect("opens")
                .as_slice(),
            b"t"
        );
        let resealed = after
            .seal(Kind::Link, &["local", "github"], b"t")
            .expect("seals");
        assert!(!after.is_previous(&resealed));
        assert!(
            before
                .open(Kind::Link, &["local", "github"], &resealed)
                .is_err()
        );
    }

    #[test]
    fn sealed_bytes_do_not_hold_the_plaintext() {
        let cipher = cipher();
        let token = b"gho_16C7e42F292c6912E7710c838347Ae178B4a";
        let sealed = cipher
            .seal(Kind::Link, &["local", "github"], token)
            .expect("seals");
        assert!(!sealed.windows(8).any(|w| token.windows(8).any(|t| t == w)));
    }

    #[test]
    fn keys_parse_from_base64_or_hex_and_nothing_else() {
        let hex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        assert!(Key::parse(hex).is_ok());
        assert!(Key::parse(&format!("  {hex}\n")).is_ok());
        assert!(Key::parse("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").is_ok());
        assert!(Key::parse("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8").is_ok());
        let short = Key::parse("AAECAwQ=")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(short.contains("this one is 5"), "{short}");
        assert!(Key::parse("not a key at all!").is_err());
        assert_eq!(format!("{:?}", Key::parse(hex).expect("key")), "Key(..)");
    }

    #[test]
    fn a_key_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let file = tempfile::NamedTempFile::new().expect("file");
        std::fs::write(file.path(), Key::generate().expect("key")).expect("write");
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o640))
            .expect("chmod");
        let error = Key::read(file.path())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("chmod 600"), "{error}");
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o600))
            .expect("chmod");
        assert!(Key::read(file.path()).is_ok());
    }
}
