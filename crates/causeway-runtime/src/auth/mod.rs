//! Who a client is, and what it may do: the hello's credentials checked
//! against the cluster's users (argon2id hashes in the users file), or the
//! role the cluster gives anonymous clients; failed logins limited per
//! source and counted.
//!
//! * A client without credentials gets `anonymous`'s role, or is refused
//!   when the cluster names none.
//! * An unknown user and a wrong password are refused alike, after the same
//!   work (a verification against a hash of no user's), so a refusal tells
//!   a stranger nothing of which names exist.
//! * Verifications run off the async threads, at most
//!   [`MAX_VERIFYING`] at once: a flood of logins costs a bounded share of
//!   the CPU and memory (argon2id takes 19 MiB for each). A password that
//!   was verified is remembered for [`REMEMBERED_FOR`] — as an HMAC under a
//!   key of this process, never as itself — so that a client that
//!   reconnects, or opens many sessions, pays the verification once; a
//!   wrong password is always verified.
//! * The users file is read again when it changes (looked at, at most,
//!   once a second, at a login), so users are added, removed and given new
//!   passwords without a restart; a file that no longer parses is logged
//!   and the users read before are kept.

mod limiter;
pub mod users;

use crate::metrics::Metrics;
use causeway_wire::{Credentials, Role, WireError};
use limiter::FailedLogins;
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::Semaphore;
pub use users::{hash_password, verify_password, User, Users};

/// Passwords verified at once, at most, node-wide.
pub const MAX_VERIFYING: usize = 2;

/// How long a verified password is remembered, and for how many users at
/// most (a change of the users file forgets them all).
pub const REMEMBERED_FOR: Duration = Duration::from_secs(300);
const MAX_REMEMBERED: usize = 4096;

/// Who may connect to a cluster's nodes (`[auth]` of the config file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthPlan {
    /// The role of a client that sends no credentials; `None`: it is refused.
    pub anonymous: Option<Role>,
    /// The users file; `None`: no users.
    pub users_file: Option<PathBuf>,
    /// Failed logins from one source within `failed_login_window`, past
    /// which its logins are refused unchecked until the window ends.
    pub max_failed_logins: u32,
    pub failed_login_window: Duration,
}

impl AuthPlan {
    /// Defaults of the limits on failed logins.
    pub const MAX_FAILED_LOGINS: u32 = 5;
    pub const FAILED_LOGIN_WINDOW: Duration = Duration::from_secs(60);

    /// Every client admitted without credentials, as `role`: clusters on
    /// one machine (`dev`, `demo`, `bench`), and tests.
    pub fn anonymous(role: Role) -> Self {
        AuthPlan {
            anonymous: Some(role),
            users_file: None,
            max_failed_logins: Self::MAX_FAILED_LOGINS,
            failed_login_window: Self::FAILED_LOGIN_WINDOW,
        }
    }
}

/// The users file as last read, and how to tell it changed; the passwords
/// verified since, by user: their MAC, and when.
struct Loaded {
    users: Users,
    stamp: Option<(SystemTime, u64)>,
    looked_at: Instant,
    verified: HashMap<String, ([u8; 32], Instant)>,
}

/// A node's logins.
pub struct Authenticator {
    plan: AuthPlan,
    loaded: Mutex<Loaded>,
    failures: Mutex<FailedLogins>,
    verifying: Arc<Semaphore>,
    /// The key of the MACs of remembered passwords (random, this process's).
    memory_key: Vec<u8>,
    /// A hash no password was given for: what an unknown user's password
    /// is checked against, so that it costs what a known one does (`None`
    /// without a users file: there are no names to hide).
    decoy: Option<String>,
    metrics: Arc<Metrics>,
}

/// The outcome of a login, as `client_logins_total` counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    User,
    Anonymous,
    AnonymousRefused,
    BadCredentials,
    RateLimited,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::User => "user",
            Outcome::Anonymous => "anonymous",
            Outcome::AnonymousRefused => "anonymous_refused",
            Outcome::BadCredentials => "bad_credentials",
            Outcome::RateLimited => "rate_limited",
        }
    }
}

impl Authenticator {
    /// Reads the users file, if the plan names one.
    pub fn new(plan: AuthPlan, metrics: Arc<Metrics>) -> Result<Self, String> {
        let (users, stamp) = match &plan.users_file {
            Some(path) => (Users::load(path)?, file_stamp(path)),
            None => (Users::default(), None),
        };
        if plan.anonymous.is_none() && users.is_empty() {
            return Err("no client could connect: the users file lists nobody and anonymous clients are refused".into());
        }
        let decoy = match &plan.users_file {
            Some(_) => Some(hash_password("no user has this password").map_err(|e| format!("cannot hash: {e}"))?),
            None => None,
        };
        Ok(Authenticator {
            failures: Mutex::new(FailedLogins::new(plan.max_failed_logins, plan.failed_login_window)),
            plan,
            loaded: Mutex::new(Loaded { users, stamp, looked_at: Instant::now(), verified: HashMap::new() }),
            memory_key: crate::token::random_key(),
            verifying: Arc::new(Semaphore::new(MAX_VERIFYING)),
            decoy,
            metrics,
        })
    }

    /// Logs a client in from `from`: its role, or why it is refused.
    pub async fn login(&self, from: IpAddr, credentials: Option<Credentials>) -> Result<Role, WireError> {
        let result = self.check(from, credentials).await;
        let outcome = match &result {
            Ok((_, o)) | Err((_, o)) => *o,
        };
        self.metrics.count_login(outcome.label());
        result.map(|(role, _)| role).map_err(|(e, _)| e)
    }

    async fn check(
        &self,
        from: IpAddr,
        credentials: Option<Credentials>,
    ) -> Result<(Role, Outcome), (WireError, Outcome)> {
        let Some(Credentials { user, password }) = credentials else {
            return match self.plan.anonymous {
                Some(role) => Ok((role, Outcome::Anonymous)),
                None => Err((
                    WireError::Unauthenticated(
                        "this cluster admits no anonymous client: log in as a user of its users file".into(),
                    ),
                    Outcome::AnonymousRefused,
                )),
            };
        };
        let refused = || (WireError::Unauthenticated("unknown user or wrong password".into()), Outcome::BadCredentials);
        if let Err(wait) = lock(&self.failures).attempt(from, Instant::now()) {
            let why = format!("too many failed logins from {from}: try again in {} s", wait.as_secs());
            return Err((WireError::Unauthenticated(why), Outcome::RateLimited));
        }
        if user.len() > users::MAX_USER_BYTES || password.len() > users::MAX_PASSWORD_BYTES {
            return Err(refused());
        }
        let known = self.user(&user);
        let Some(hash) = known.as_ref().map(|u| u.password_hash.clone()).or_else(|| self.decoy.clone()) else {
            return Err(refused());
        };
        let mac = self.mac(&user, &password);
        let matches = if known.is_some() && self.remembered(&user, &mac) {
            true
        } else {
            let Ok(_permit) = self.verifying.clone().acquire_owned().await else { return Err(refused()) };
            tokio::task::spawn_blocking(move || verify_password(&password, &hash)).await.unwrap_or(false)
        };
        match known {
            Some(u) if matches => {
                lock(&self.failures).succeeded(from);
                self.remember(&u.name, mac);
                tracing::debug!(user = %u.name, %from, role = %u.role, "a client logged in");
                Ok((u.role, Outcome::User))
            }
            _ => {
                tracing::info!(%from, user = %truncated(&user), "a login failed: unknown user or wrong password");
                Err(refused())
            }
        }
    }

    /// The user `name`, from the users file as it is now.
    fn user(&self, name: &str) -> Option<User> {
        let mut loaded = lock(&self.loaded);
        if let Some(path) = &self.plan.users_file {
            if loaded.looked_at.elapsed() >= Duration::from_secs(1) {
                loaded.looked_at = Instant::now();
                let stamp = file_stamp(path);
                if stamp != loaded.stamp {
                    loaded.stamp = stamp;
                    match Users::load(path) {
                        Ok(users) => {
                            tracing::info!(users = users.len(), "the users file changed: read again");
                            loaded.users = users;
                            loaded.verified.clear();
                        }
                        Err(e) => {
                            tracing::error!("the users file changed and is refused (the users before are kept): {e}")
                        }
                    }
                }
            }
        }
        loaded.users.get(name).cloned()
    }
}

impl Authenticator {
    /// The MAC a verified password is remembered by.
    fn mac(&self, user: &str, password: &str) -> [u8; 32] {
        use hmac::{Hmac, Mac};
        let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(&self.memory_key).expect("any key length");
        mac.update(user.as_bytes());
        mac.update(&[0]);
        mac.update(password.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// Whether `user` logged in with the password of this MAC lately.
    fn remembered(&self, user: &str, mac: &[u8; 32]) -> bool {
        let loaded = lock(&self.loaded);
        loaded.verified.get(user).is_some_and(|(m, at)| m == mac && at.elapsed() < REMEMBERED_FOR)
    }

    fn remember(&self, user: &str, mac: [u8; 32]) {
        let mut loaded = lock(&self.loaded);
        if loaded.verified.len() >= MAX_REMEMBERED && !loaded.verified.contains_key(user) {
            loaded.verified.retain(|_, (_, at)| at.elapsed() < REMEMBERED_FOR);
            if loaded.verified.len() >= MAX_REMEMBERED {
                return;
            }
        }
        loaded.verified.insert(user.to_string(), (mac, Instant::now()));
    }
}

/// A user name as a log may show it: a stranger's may be long.
fn truncated(s: &str) -> &str {
    let mut end = s.len().min(64);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn file_stamp(path: &std::path::Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
