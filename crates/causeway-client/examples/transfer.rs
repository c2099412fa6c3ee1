//! Moves an amount between two accounts in one transaction, then reads both
//! balances back in a read-only transaction on a second connection that
//! resumes the first one's session.
//!
//! ```sh
//! cargo run -p causeway-client --example transfer -- 127.0.0.1:7100 alice bob 10
//! ```
//!
//! Under causal consistency two transfers that read the same balances do
//! not conflict: the last writer wins and the other update is lost. Run
//! twice in a row, the second run starts a new session whose snapshot may
//! not include the first run's commit yet (Wren makes a commit visible to
//! other sessions once it is stable, a few milliseconds later). Money moved
//! this way needs one writer per account, or a serializable protocol.

use causeway_client::{Bytes, Client, Error};
use std::process::ExitCode;

/// A balance as stored: decimal text; a missing account holds 0.
fn balance(value: &Option<Bytes>) -> Result<i64, Error> {
    match value {
        None => Ok(0),
        Some(bytes) => std::str::from_utf8(bytes)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Error::InvalidArgument(format!("{bytes:?} is not a balance"))),
    }
}

async fn transfer(addr: &str, from: &str, to: &str, amount: i64) -> Result<(), Error> {
    let mut client = Client::connect(addr).await?;
    let server = client.server();
    println!("connected to {} (DC {}, protocol {})", server.node, server.dc, server.protocol);

    client.begin().await?;
    let values = client.read(&[from, to]).await?;
    let (a, b) = (balance(&values[0])?, balance(&values[1])?);
    if a < amount {
        client.abort().await?;
        println!("{from} holds {a}, less than {amount}: nothing moved");
        return Ok(());
    }
    client.write(from.to_owned(), (a - amount).to_string()).await?;
    client.write(to.to_owned(), (b + amount).to_string()).await?;
    let stamp = client.commit().await?;
    println!("moved {amount} from {from} to {to}; commit {stamp:?}");

    // Another connection sees the transfer once it resumes this session.
    let token = client.export_session().await?;
    let mut other = Client::connect(addr).await?;
    other.resume_session(&token).await?;
    let values = other.read_only(&[from, to]).await?;
    println!("{from} = {}, {to} = {}", balance(&values[0])?, balance(&values[1])?);
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (addr, from, to, amount) = match &args[..] {
        [addr, from, to, amount] => match amount.parse::<i64>() {
            Ok(amount) if amount >= 0 => (addr, from, to, amount),
            _ => {
                eprintln!("the amount must be a non-negative whole number, not {amount:?}");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("usage: transfer ADDR FROM TO AMOUNT   (e.g. transfer 127.0.0.1:7100 alice bob 10)");
            return ExitCode::from(2);
        }
    };
    match transfer(addr, from, to, amount).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
