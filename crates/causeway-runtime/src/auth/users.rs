//! The users file: each user's name, role and argon2id password hash, as
//! `causeway user` writes it. A password itself is never stored.
//!
//! ```toml
//! [[user]]
//! name = "alice"
//! role = "write"            # read, write or admin
//! password_hash = "$argon2id$v=19$m=19456,t=2,p=1$…"
//! ```

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use causeway_wire::Role;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The longest user name and password accepted (a hello is at most 64 KiB
/// anyway; these keep a stranger's hello from costing more than a login).
pub const MAX_USER_BYTES: usize = 128;
pub const MAX_PASSWORD_BYTES: usize = 1024;
/// The shortest password `causeway user` stores.
pub const MIN_PASSWORD_CHARS: usize = 8;

/// One user of the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct User {
    pub name: String,
    #[serde(with = "role_name")]
    pub role: Role,
    /// A PHC string: `$argon2id$v=19$m=…,t=…,p=…$salt$hash`.
    pub password_hash: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct UsersFile {
    #[serde(default)]
    user: Vec<User>,
}

/// The users of a cluster, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Users {
    by_name: BTreeMap<String, User>,
}

impl Users {
    /// Parses a users file's text, checking every entry (names, roles,
    /// hashes that argon2 can read).
    pub fn parse(text: &str) -> Result<Users, String> {
        let file: UsersFile = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut by_name = BTreeMap::new();
        for u in file.user {
            check_name(&u.name)?;
            let hash = PasswordHash::new(&u.password_hash)
                .map_err(|e| format!("user {:?}: password_hash is not a PHC string: {e}", u.name))?;
            if hash.algorithm.as_str() != "argon2id" {
                return Err(format!("user {:?}: password_hash must be argon2id, got {}", u.name, hash.algorithm));
            }
            if by_name.contains_key(&u.name) {
                return Err(format!("user {:?} is listed twice", u.name));
            }
            by_name.insert(u.name.clone(), u);
        }
        Ok(Users { by_name })
    }

    /// Reads and parses the users file at `path`.
    pub fn load(path: &Path) -> Result<Users, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Users::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The file's text.
    pub fn to_toml(&self) -> String {
        let file = UsersFile { user: self.by_name.values().cloned().collect() };
        let mut text = String::from("# Causeway users: written by `causeway user`. Passwords are argon2id hashes.\n\n");
        text.push_str(&toml_ser(&file));
        text
    }

    pub fn get(&self, name: &str) -> Option<&User> {
        self.by_name.get(name)
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &User> {
        self.by_name.values()
    }

    /// Adds `user`, or replaces the user of that name (a new password or role).
    pub fn upsert(&mut self, user: User) {
        self.by_name.insert(user.name.clone(), user);
    }

    /// Removes the user `name`; whether there was one.
    pub fn remove(&mut self, name: &str) -> bool {
        self.by_name.remove(name).is_some()
    }
}

/// A user name is 1 to 128 bytes of letters, digits, `.`, `_`, `-` and `@`.
pub fn check_name(name: &str) -> Result<(), String> {
    let fine = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@');
    if name.is_empty() || name.len() > MAX_USER_BYTES || !name.chars().all(fine) {
        return Err(format!("user name {name:?}: 1 to {MAX_USER_BYTES} letters, digits, '.', '_', '-' or '@'"));
    }
    Ok(())
}

/// The argon2id hash of `password` with a fresh random salt, as a PHC
/// string (argon2's defaults: 19 MiB, 2 passes, 1 lane — OWASP's advice).
pub fn hash_password(password: &str) -> Result<String, String> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(format!("a password must have at least {MIN_PASSWORD_CHARS} characters"));
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(format!("a password must have at most {MAX_PASSWORD_BYTES} bytes"));
    }
    let mut salt = [0u8; 16];
    rand::TryRngCore::try_fill_bytes(&mut rand::rngs::OsRng, &mut salt)
        .map_err(|e| format!("no randomness for a salt: {e}"))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| e.to_string())?;
    Argon2::default().hash_password(password.as_bytes(), &salt).map(|h| h.to_string()).map_err(|e| e.to_string())
}

/// Whether `password` matches the PHC string `hash`. Slow on purpose
/// (tens of milliseconds): call it off the async threads.
pub fn verify_password(password: &str, hash: &str) -> bool {
    match PasswordHash::new(hash) {
        Ok(h) => Argon2::default().verify_password(password.as_bytes(), &h).is_ok(),
        Err(_) => false,
    }
}

fn toml_ser(file: &UsersFile) -> String {
    // The format is three string fields per user: written by hand, so the
    // toml crate's serializer (a feature left off) is not needed.
    let mut out = String::new();
    for u in &file.user {
        out.push_str("[[user]]\n");
        out.push_str(&format!("name = {}\n", quote(&u.name)));
        out.push_str(&format!("role = {}\n", quote(u.role.name())));
        out.push_str(&format!("password_hash = {}\n\n", quote(&u.password_hash)));
    }
    out
}

/// A TOML basic string. Names and PHC strings hold no quote or backslash
/// (checked), so this only frames them.
fn quote(s: &str) -> String {
    debug_assert!(!s.contains(['"', '\\', '\n']));
    format!("\"{s}\"")
}

mod role_name {
    use causeway_wire::Role;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(r: &Role, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(r.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Role, D::Error> {
        let name = String::deserialize(d)?;
        Role::parse(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown role {name:?}: read, write or admin")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only() {
        let h = hash_password("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$"), "{h}");
        assert!(verify_password("correct horse", &h));
        assert!(!verify_password("correct horsf", &h));
        assert!(!verify_password("correct horse", "not a hash"));
        assert_ne!(hash_password("correct horse").unwrap(), h, "salted");
        assert!(hash_password("short").is_err());
    }

    #[test]
    fn the_file_round_trips_and_refuses_what_is_wrong() {
        let mut users = Users::default();
        users.upsert(User {
            name: "alice".into(),
            role: Role::Write,
            password_hash: hash_password("alicepass").unwrap(),
        });
        users.upsert(User {
            name: "ops@x".into(),
            role: Role::Admin,
            password_hash: hash_password("opspass1").unwrap(),
        });
        let text = users.to_toml();
        assert_eq!(Users::parse(&text).unwrap(), users);

        let bad = [
            ("[[user]]\nname = \"a\"\nrole = \"root\"\npassword_hash = \"x\"", "unknown role"),
            ("[[user]]\nname = \"a b\"\nrole = \"read\"\npassword_hash = \"$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaA\"", "user name"),
            ("[[user]]\nname = \"a\"\nrole = \"read\"\npassword_hash = \"plain\"", "PHC"),
            ("[[user]]\nname = \"a\"\nrole = \"read\"\npassword_hash = \"$pbkdf2-sha256$i=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA\"", "argon2id"),
            ("[[user]]\nname = \"a\"\nrole = \"read\"\npassword = \"x\"", "unknown field"),
        ];
        for (text, want) in bad {
            let e = Users::parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let twice = format!("{}\n{}", users.to_toml(), users.to_toml().replace("# Causeway", "# again"));
        assert!(Users::parse(&twice).unwrap_err().contains("listed twice"));
    }
}
