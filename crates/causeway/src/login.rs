//! How a client command logs in: `--user`, with the password from
//! `--password-file` or the `CAUSEWAY_PASSWORD` environment variable (never
//! from the command line, where other users of the machine see it).

use anyhow::{bail, Context, Result};
use causeway_client::Credentials;
use clap::Args;
use std::path::PathBuf;

/// The environment variable a password may come from.
pub const PASSWORD_ENV: &str = "CAUSEWAY_PASSWORD";

#[derive(Args, Debug, Clone, Default)]
pub struct LoginArgs {
    /// Log in as this user of the cluster (its [auth] users file); without
    /// it, anonymously, which only a cluster whose config says so admits.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// The user's password: the first line of this file (default: the
    /// CAUSEWAY_PASSWORD environment variable).
    #[arg(long, value_name = "FILE", requires = "user")]
    pub password_file: Option<PathBuf>,
}

impl LoginArgs {
    /// The credentials asked for, if any.
    pub fn credentials(&self) -> Result<Option<Credentials>> {
        let Some(user) = &self.user else { return Ok(None) };
        let password = match &self.password_file {
            Some(path) => {
                let text =
                    std::fs::read_to_string(path).with_context(|| format!("--password-file {}", path.display()))?;
                text.lines().next().unwrap_or_default().to_string()
            }
            None => match std::env::var(PASSWORD_ENV) {
                Ok(p) => p,
                Err(_) => bail!("--user {user}: give the password in {PASSWORD_ENV} or with --password-file FILE"),
            },
        };
        if password.is_empty() {
            bail!("--user {user}: the password is empty");
        }
        Ok(Some(Credentials { user: user.clone(), password }))
    }
}
