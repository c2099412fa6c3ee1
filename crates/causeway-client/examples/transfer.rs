//! Moves an amount between two accounts in one transaction, then reads both
//! balances back in a read-only transaction on a second connection that
//! resumes the first one's session.
//!
//! ```sh
//! cargo run -p causeway-client --example transfer -- 127.0.0.1:7100 alice bob 10
//! cargo run -p causeway-client --example transfer -- 127.0.0.1:7100 alice bob 10 TOKEN
//! ```
//!
//! Each run is a new session. It reads a causal snapshot: everything the
//! session wrote, and everything that was stable in its DC when the snapshot
//! was taken — but not necessarily a write another session made a moment ago
//! (in `causeway shell`, say: Wren makes a commit visible to other sessions
//! once it is stable, a few milliseconds later). Read-your-writes holds
//! within a session, not across unrelated ones; to continue another
//! session, pass its token (`token` in the shell) as a fifth argument.
//!
//! Under causal consistency two transfers that read the same balances do
//! not conflict: the last writer wins and the other update is lost. Money
//! moved this way needs one writer per account, or a serializable protocol
//! (Geo-SDUR, `protocol = "sdur"`), which aborts one of two such transfers;
//! the transfer runs in `Client::retry`, which runs it again.

use causeway_client::{Bytes, Client, Error, SessionToken, Stamp};
use std::process::ExitCode;

/// A balance as stored: decimal text; `None` for an account with no value.
fn balance(value: &Option<Bytes>) -> Result<Option<i64>, Error> {
    match value {
        None => Ok(None),
        Some(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(|s| s.parse().ok())
            .map(Some)
            .ok_or_else(|| Error::InvalidArgument(format!("{bytes:?} is not a balance"))),
    }
}

fn shown(balance: Option<i64>) -> String {
    balance.map_or("nothing".to_string(), |b| b.to_string())
}

/// When and where a transaction committed, for people: the stamp's hybrid
/// clock holds microseconds since the Unix epoch above 12 logical bits.
fn committed(stamp: Option<Stamp>) -> String {
    let Some(s) = stamp else { return "committed (it wrote nothing)".to_string() };
    let micros = s.ts >> 12;
    let (secs, frac) = (micros / 1_000_000, micros % 1_000_000);
    let (h, m, sec) = (secs / 3600 % 24, secs / 60 % 60, secs % 60);
    format!("committed in DC {} at {h:02}:{m:02}:{sec:02}.{frac:06} UTC", s.dc)
}

/// Why a new session may not see a balance just written elsewhere.
const WHY: &str = "This run is a new session: it reads a causal snapshot of its DC, which holds what this
session wrote and what was stable when the snapshot was taken, but not necessarily a
write another session made a moment ago (in `causeway shell`, say). Causal consistency
gives read-your-writes within a session, not across unrelated sessions. Run again in a
moment, or resume that session: pass its token (`token` in the shell) as a fifth argument.";

async fn transfer(
    addr: &str,
    from: &str,
    to: &str,
    amount: i64,
    token: Option<&SessionToken>,
    say: &mut impl FnMut(String),
) -> Result<(), Error> {
    let mut client = Client::connect(addr).await?;
    let server = client.server();
    say(format!("connected to {} (DC {}, protocol {})", server.node, server.dc, server.protocol));
    if let Some(token) = token {
        client.resume_session(token).await?;
        say("continuing the session of the token given".to_string());
    }

    // The whole transaction, run again if a serializable store aborts it
    // for a conflict (under TCC it always commits, and the last writer wins).
    let (f, t) = (from.to_owned(), to.to_owned());
    let moved = client
        .retry(5, move |c| {
            let (from, to) = (f.clone(), t.clone());
            Box::pin(async move {
                c.begin().await?;
                let values = c.read(&[from.as_str(), to.as_str()]).await?;
                let (a, b) = (balance(&values[0])?, balance(&values[1])?);
                if a.unwrap_or(0) < amount {
                    c.abort().await?;
                    return Ok(Err(a));
                }
                let (a, b) = (a.unwrap_or(0), b.unwrap_or(0));
                c.write(from, (a - amount).to_string()).await?;
                c.write(to, (b + amount).to_string()).await?;
                Ok(Ok(c.commit().await?))
            })
        })
        .await?;
    match moved {
        Ok(stamp) => say(format!("moved {amount} from {from} to {to}: {}", committed(stamp))),
        Err(held) => {
            say(format!("{from} holds {}, less than {amount}: nothing moved", shown(held)));
            if token.is_none() {
                say(WHY.to_string());
            }
            return Ok(());
        }
    }

    // Another connection sees the transfer once it resumes this session.
    let token = client.export_session().await?;
    let mut other = Client::connect(addr).await?;
    other.resume_session(&token).await?;
    let values = other.read_only(&[from, to]).await?;
    say(format!(
        "{from} = {}, {to} = {} (read on a second connection that resumed this session)",
        shown(balance(&values[0])?),
        shown(balance(&values[1])?)
    ));
    Ok(())
}

const USAGE: &str = "usage: transfer ADDR FROM TO AMOUNT [TOKEN]   (e.g. transfer 127.0.0.1:7100 alice bob 10)";

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (addr, from, to, amount, token) = match &args[..] {
        [addr, from, to, amount, rest @ ..] if rest.len() <= 1 => {
            let Some(amount) = amount.parse::<i64>().ok().filter(|a| *a >= 0) else {
                eprintln!("the amount must be a non-negative whole number, not {amount:?}");
                return ExitCode::from(2);
            };
            let token = match rest.first().map(|t| t.parse::<SessionToken>()) {
                None => None,
                Some(Ok(token)) => Some(token),
                Some(Err(e)) => {
                    eprintln!("{:?} is not a session token: {e}", rest[0]);
                    return ExitCode::from(2);
                }
            };
            (addr, from, to, amount, token)
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match transfer(addr, from, to, amount, token.as_ref(), &mut |line| println!("{line}")).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_client::testing::MockServer;

    async fn run(server: &MockServer, from: &str, to: &str, amount: i64) -> String {
        let mut lines = Vec::new();
        transfer(&server.addr().to_string(), from, to, amount, None, &mut |l| lines.push(l))
            .await
            .expect("the transfer runs");
        lines.join("\n")
    }

    #[tokio::test]
    async fn it_prints_for_people_not_rust_debug_output() {
        let server = MockServer::start().await.unwrap();
        let mut setup = Client::connect(server.addr()).await.unwrap();
        setup.begin().await.unwrap();
        setup.write("alice", "100").await.unwrap();
        setup.commit().await.unwrap();
        let text = run(&server, "alice", "bob", 10).await;
        assert!(text.contains("moved 10 from alice to bob"), "{text}");
        assert!(text.contains("alice = 90, bob = 10"), "{text}");
        assert!(!text.contains("new session"), "nothing to explain: {text}");
        for debug in ["Some(", "Stamp {", "ts:", "txid:"] {
            assert!(!text.contains(debug), "Rust debug output: {text}");
        }
        assert!(text.contains("committed in DC 0"), "{text}");
    }

    #[tokio::test]
    async fn an_empty_balance_is_explained() {
        // What a user sees right after writing `alice` in another session
        // whose write this new session's snapshot does not include yet.
        let server = MockServer::start().await.unwrap();
        let text = run(&server, "alice", "bob", 10).await;
        assert!(text.contains("alice holds nothing"), "{text}");
        assert!(text.contains("nothing moved"), "{text}");
        for why in ["new session", "snapshot", "another session", "read-your-writes", "resume"] {
            assert!(text.contains(why), "the explanation should mention {why:?}: {text}");
        }
    }
}
